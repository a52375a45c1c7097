//! The fast path (`transforms/flat.rs`) against the generic one: the same pipeline with and
//! without it must give every record the same fate and, byte for byte, the same key and value.

use super::*;
use crate::consumer::ConsumerRecord;

fn config(pairs: &[(&str, &str)]) -> TaskConfig {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// The pipeline with its fast path, and the same one without.
fn both(pairs: &[(&str, &str)], registry: &Registry) -> (Pipeline, Pipeline) {
    let fast = Pipeline::from_config(&config(pairs), registry).unwrap().unwrap();
    let mut slow = Pipeline::from_config(&config(pairs), registry).unwrap().unwrap();
    slow.fast = None;
    (fast, slow)
}

fn record(key: Option<&[u8]>, value: Option<&[u8]>) -> SinkRecord {
    let mut r = ConsumerRecord::for_test("or\"ders\u{e9}".into(), 3, 77);
    r.timestamp = 1_700_000_000_123;
    r.key = key.map(bytes::Bytes::copy_from_slice);
    r.value = value.map(bytes::Bytes::copy_from_slice);
    r
}

/// What a record became, comparable.
fn fate(p: &Pipeline, r: &SinkRecord, buf: &mut BytesMut) -> String {
    match p.run_in(r, buf) {
        Passed::Record(out, schemas) => format!(
            "record topic={} key={:?} value={:?} ts={} headers={} schemas={:?}",
            out.topic,
            out.key,
            out.value,
            out.timestamp,
            out.headers.len(),
            schemas
        ),
        Passed::Dropped => "dropped".to_string(),
        Passed::Failed { stage, reason } => format!("failed {stage}: {reason}"),
    }
}

const VALUES: &[&str] = &[
    r#"{"id":1,"name":"customer-1","amount":1.25,"tag":"tk","note":"xxxx"}"#,
    r#"{}"#,
    r#" { "b" : 2 , "a" : [1, 2.50, {"z": 1, "y": null}] , "c": {"k": "v"} } "#,
    r#"{"dup":1,"dup":"second","a":true,"dup":{"third":false}}"#,
    r#"{"esc\"aped\n":"a\tb\u0041\/\u00e9\ud83d\ude00","plain":"é😀","ctl":"\u0001\u001f\u007f"}"#,
    r#"{"n":-0,"m":-0.0,"f":1e2,"g":1E-7,"h":12.250,"i":18446744073709551615,"j":18446744073709551616,"k":-9223372036854775808,"l":-9223372036854775809,"o":0.1,"p":1.7976931348623157e308}"#,
    r#"{"name":"x","customer":"y","tag":"z","source":"s","topic":1,"p":2,"o":3,"ts":4}"#,
    r#"{"a":1,"b":2,"c":3,"d":4}"#,
    r#"{"\u0061":1,"a":2}"#,
    r#"[1,2]"#,
    r#""text""#,
    r#"12"#,
    r#"null"#,
    r#"{"a":1} trailing"#,
    r#"{"a":1,}"#,
    r#"{"a":"\ud800"}"#,
    "{\"a\":\"\u{0}\"}",
    r#"not json"#,
    "",
];

/// The bench-sink case, and chains that exercise every setting of both transforms.
const CHAINS: &[&[(&str, &str)]] = &[
    &[
        ("transforms", "insert,replace"),
        ("transforms.insert.type", "org.apache.kafka.connect.transforms.InsertField$Value"),
        ("transforms.insert.static.field", "source"),
        ("transforms.insert.static.value", "bench"),
        ("transforms.replace.type", "org.apache.kafka.connect.transforms.ReplaceField$Value"),
        ("transforms.replace.exclude", "tag"),
        ("transforms.replace.renames", "name:customer"),
    ],
    &[],
    &[
        ("transforms", "i"),
        ("transforms.i.type", "InsertField$Value"),
        ("transforms.i.topic.field", "topic!"),
        ("transforms.i.partition.field", "p?"),
        ("transforms.i.offset.field", "o"),
        ("transforms.i.timestamp.field", "ts"),
        ("transforms.i.static.field", "a"),
        ("transforms.i.static.value", "st\"at\u{e9}ic"),
    ],
    &[
        ("transforms", "r,s"),
        ("transforms.r.type", "ReplaceField$Value"),
        ("transforms.r.include", "a,b,dup,esc\"aped\n,n,f,i"),
        ("transforms.r.renames", "a:b,b:a,dup:a,n:zz,f:zz"),
        ("transforms.s.type", "ReplaceField$Value"),
        ("transforms.s.blacklist", "zz"),
        ("transforms.s.renames", "b:c,c:b"),
    ],
];

#[test]
fn the_fast_path_gives_every_record_what_the_generic_path_gives_it() {
    let registry = Registry::with_builtins();
    let converters: &[&[(&str, &str)]] = &[
        &[("value.converter", "json"), ("value.converter.schemas.enable", "false")],
        &[
            ("key.converter", "org.apache.kafka.connect.json.JsonConverter"),
            ("value.converter", "org.apache.kafka.connect.json.JsonConverter"),
            ("value.converter.schemas.enable", "FALSE"),
        ],
    ];
    let keys: &[Option<&[u8]>] =
        &[None, Some(b"k"), Some(br#"{"schema":{"type":"string"},"payload":"k"}"#), Some(b"{")];
    let mut buf = BytesMut::new();
    for conv in converters {
        for chain in CHAINS {
            let pairs: Vec<(&str, &str)> = conv.iter().chain(chain.iter()).copied().collect();
            let (fast, slow) = both(&pairs, &registry);
            let flat = fast.fast.as_ref().expect("the fast path");
            // It takes the objects (the test is worth nothing if it declined everything).
            for v in &VALUES[..9] {
                assert!(flat.value(&record(None, Some(v.as_bytes())), &mut buf).is_some(), "{v}");
            }
            buf.clear();
            for key in keys {
                for value in VALUES.iter().map(|v| Some(v.as_bytes())).chain([None]) {
                    let r = record(*key, value);
                    let want = fate(&slow, &r, &mut BytesMut::new());
                    assert_eq!(fate(&fast, &r, &mut buf), want, "{pairs:?} key {key:?} value {value:?}");
                    assert!(buf.is_empty());
                }
            }
        }
    }
}

#[test]
fn the_fast_path_is_only_for_built_in_schemaless_json_and_field_transforms_without_predicates() {
    let registry = Registry::with_builtins();
    let json = [("value.converter", "json"), ("value.converter.schemas.enable", "false")];
    fn with<'a>(json: &[(&'a str, &'a str)], extra: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
        json.iter().chain(extra).copied().collect()
    }
    let fast = |pairs: &[(&str, &str)], registry: &Registry| both(pairs, registry).0.fast.is_some();
    assert!(fast(&json, &registry));
    assert!(!fast(&[("value.converter", "json")], &registry), "schemas.enable defaults to true");
    assert!(!fast(&[("value.converter", "string")], &registry));
    assert!(!fast(
        &with(&json, &[("transforms", "m"), ("transforms.m.type", "MaskField$Value"), ("transforms.m.fields", "a")]),
        &registry
    ));
    assert!(!fast(
        &with(
            &json,
            &[("transforms", "i"), ("transforms.i.type", "InsertField$Key"), ("transforms.i.offset.field", "o")]
        ),
        &registry
    ));
    let predicated = with(
        &json,
        &[
            ("transforms", "i"),
            ("transforms.i.type", "InsertField$Value"),
            ("transforms.i.offset.field", "o"),
            ("transforms.i.predicate", "t"),
            ("predicates", "t"),
            ("predicates.t.type", "RecordIsTombstone"),
        ],
    );
    assert!(!fast(&predicated, &registry));
    // A user's converter or transform under a built-in's name is theirs: no fast path.
    let mut mine = Registry::with_builtins();
    mine.register_converter("json", |_: &ConverterConfig| {
        Ok(Box::new(super::super::converter::StringConverter) as Box<dyn Converter>)
    });
    assert!(!fast(&json, &mine));
    let mut mine = Registry::with_builtins();
    mine.register_transform("InsertField$Value", |_: &TransformSettings| {
        Err::<Box<dyn Transformation>, String>("mine".into())
    });
    let insert = with(
        &json,
        &[("transforms", "i"), ("transforms.i.type", "InsertField$Value"), ("transforms.i.offset.field", "o")],
    );
    assert!(Pipeline::from_config(&config(&insert), &mine).is_err(), "the user's transform is the one made");
    assert!(fast(&insert, &registry));
}
