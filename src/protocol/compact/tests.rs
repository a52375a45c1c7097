//! The shared reader and writer: round trips, exact errors on truncated input, overlong
//! varints and the three overflow policies, lengths a Java int would read as negative, and no
//! panic on any input.

use bytes::{BufMut, Bytes, BytesMut};
use proptest::prelude::*;
use uuid::Uuid;

use super::*;

fn bytes(v: &[u8]) -> Bytes {
    Bytes::copy_from_slice(v)
}

#[test]
fn uvarint_round_trips_at_every_width() {
    for v in [0, 1, 127, 128, 300, 16_383, 16_384, 2_097_151, 2_097_152, u32::MAX] {
        let mut out = BytesMut::new();
        put_uvarint(&mut out, v);
        let mut b = out.freeze();
        assert_eq!(get_uvarint(&mut b, "v").unwrap(), v);
        assert!(b.is_empty());
    }
}

#[test]
fn uvarint_known_encodings() {
    let mut out = BytesMut::new();
    put_uvarint(&mut out, 300);
    assert_eq!(&out[..], &[0xac, 0x02]);
}

#[test]
fn uvarint_rejects_overlong_and_overflowing() {
    assert!(matches!(
        get_uvarint(&mut bytes(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x01]), "v"),
        Err(CodecError::Invalid { .. })
    ));
    assert!(matches!(get_uvarint(&mut bytes(&[0xff, 0xff, 0xff, 0xff, 0x1f]), "v"), Err(CodecError::Invalid { .. })));
    assert!(matches!(get_uvarint(&mut bytes(&[0x80]), "v"), Err(CodecError::Truncated { .. })));
}

#[test]
fn the_three_overflow_policies_differ_only_on_the_fifth_byte() {
    use Overflow::*;
    /// A value, or the name of the error ("invalid", "truncated").
    type Want = Result<u32, &'static str>;
    let ok = |v: u32| -> Want { Ok(v) };
    // (input, Reject, DropBits, AsCrate).
    let cases: &[(&[u8], Want, Want, Want)] = &[
        (&[0x00], ok(0), ok(0), ok(0)),
        (&[0x7f], ok(127), ok(127), ok(127)),
        (&[0xff, 0xff, 0xff, 0xff, 0x0f], ok(u32::MAX), ok(u32::MAX), ok(u32::MAX)),
        // Bits past 32: refused, dropped, dropped.
        (&[0xff, 0xff, 0xff, 0xff, 0x1f], Err("invalid"), ok(u32::MAX), ok(u32::MAX)),
        (&[0x80, 0x80, 0x80, 0x80, 0x70], Err("invalid"), ok(0), ok(0)),
        // A continuation bit on the fifth byte: only the crate reads on as if it were not there.
        (&[0x80, 0x80, 0x80, 0x80, 0x81], Err("invalid"), Err("invalid"), ok(1 << 28)),
        (&[0x80, 0x80, 0x80, 0x80, 0x80, 0x00], Err("invalid"), Err("invalid"), ok(0)),
        // Truncation is the same for all.
        (&[], Err("truncated"), Err("truncated"), Err("truncated")),
        (&[0x80, 0x80], Err("truncated"), Err("truncated"), Err("truncated")),
    ];
    for (input, reject, drop_bits, as_crate) in cases {
        for (policy, want) in [(Reject, reject), (DropBits, drop_bits), (AsCrate, as_crate)] {
            // Over `Bytes` and over a slice: the same answer.
            let got_bytes = get_uvarint_with(&mut bytes(input), "v", policy);
            let mut slice: &[u8] = input;
            let got_slice = get_uvarint_with(&mut slice, "v", policy);
            assert_eq!(got_bytes, got_slice, "{input:02x?} {policy:?}");
            let got = got_bytes.map_err(|e| match e {
                CodecError::Invalid { .. } => "invalid",
                CodecError::Truncated { needed: 1, remaining: 0, .. } => "truncated",
                other => panic!("{other:?}"),
            });
            assert_eq!(&got, want, "{input:02x?} {policy:?}");
        }
    }
    // AsCrate stops after the fifth byte: a sixth is left for the next read.
    let mut b = bytes(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x42]);
    assert_eq!(get_uvarint_with(&mut b, "v", AsCrate), Ok(0));
    assert_eq!(&b[..], &[0x42]);
}

#[test]
fn fixed_width_values_round_trip_over_bytes_and_slices() {
    let id = Uuid::from_u128(0x0123_4567_89ab_cdef_fedc_ba98_7654_3210);
    let mut out = BytesMut::new();
    out.put_i8(-2);
    out.put_i16(-300);
    out.put_i32(i32::MIN);
    out.put_i64(i64::MAX);
    put_bool(&mut out, true);
    out.put_u8(7); // any non-zero byte is true
    put_bool(&mut out, false);
    put_uuid(&mut out, &id);
    let encoded = out.freeze();

    let mut b = encoded.clone();
    assert_eq!(get_i8(&mut b, "a"), Ok(-2));
    assert_eq!(get_i16(&mut b, "b"), Ok(-300));
    assert_eq!(get_i32(&mut b, "c"), Ok(i32::MIN));
    assert_eq!(get_i64(&mut b, "d"), Ok(i64::MAX));
    assert_eq!(get_bool(&mut b, "e"), Ok(true));
    assert_eq!(get_bool(&mut b, "f"), Ok(true));
    assert_eq!(get_bool(&mut b, "g"), Ok(false));
    assert_eq!(get_uuid(&mut b, "h"), Ok(id));
    assert!(b.is_empty());

    let mut s: &[u8] = &encoded;
    assert_eq!(get_i8(&mut s, "a"), Ok(-2));
    assert_eq!(get_i16(&mut s, "b"), Ok(-300));
    assert_eq!(get_i32(&mut s, "c"), Ok(i32::MIN));
    assert_eq!(get_i64(&mut s, "d"), Ok(i64::MAX));
    s = &s[3..];
    assert_eq!(get_uuid(&mut s, "h"), Ok(id));
    assert!(s.is_empty());
}

#[test]
fn truncated_fixed_width_values_say_how_much_is_missing_and_consume_nothing() {
    let mut b = bytes(&[1, 2, 3]);
    assert_eq!(get_i32(&mut b, "x"), Err(CodecError::Truncated { what: "x", needed: 1, remaining: 3 }));
    assert_eq!(get_i64(&mut b, "y"), Err(CodecError::Truncated { what: "y", needed: 5, remaining: 3 }));
    assert_eq!(get_uuid(&mut b, "z"), Err(CodecError::Truncated { what: "z", needed: 13, remaining: 3 }));
    assert_eq!(b.len(), 3, "a failed read leaves the buffer where it was");
    assert_eq!(get_i16(&mut &[0u8; 0][..], "w"), Err(CodecError::Truncated { what: "w", needed: 2, remaining: 0 }));
    assert_eq!(get_i8(&mut Bytes::new(), "v"), Err(CodecError::Truncated { what: "v", needed: 1, remaining: 0 }));
}

#[test]
fn compact_lengths_are_n_plus_one_with_zero_for_null() {
    assert_eq!(compact_len(0), None);
    assert_eq!(compact_len(1), Some(0));
    assert_eq!(compact_len(u32::MAX), Some(u32::MAX as usize - 1));
    assert_eq!(get_compact_len(&mut bytes(&[0]), "l"), Ok(None));
    assert_eq!(get_compact_len(&mut bytes(&[0xac, 0x02]), "l"), Ok(Some(299)));
}

#[test]
fn strings_nulls_and_bounds() {
    assert_eq!(get_nullable_string(&mut bytes(&[0]), "s").unwrap(), None);
    assert!(matches!(get_string(&mut bytes(&[0]), "s"), Err(CodecError::Invalid { .. })));
    assert_eq!(get_string(&mut bytes(&[3, b'h', b'i']), "s").unwrap(), "hi");
    assert!(matches!(
        get_string(&mut bytes(&[4, b'h', b'i']), "s"),
        Err(CodecError::Truncated { needed: 1, remaining: 2, .. })
    ));
    assert!(matches!(get_string(&mut bytes(&[3, 0xff, 0xfe]), "s"), Err(CodecError::Invalid { .. })));
    let mut long = BytesMut::new();
    assert!(put_string(&mut long, &"x".repeat(MAX_STRING_LEN + 1), "s").is_err());
}

#[test]
fn strings_bytes_and_arrays_round_trip() {
    let mut out = BytesMut::new();
    put_string(&mut out, "h\u{e9}llo \u{1f600}", "a").unwrap();
    put_string(&mut out, "", "b").unwrap();
    put_nullable_string(&mut out, None, "c").unwrap();
    put_nullable_string(&mut out, Some("x"), "d").unwrap();
    put_string(&mut out, &"y".repeat(MAX_STRING_LEN), "e").unwrap();
    put_nullable_bytes(&mut out, Some(&Bytes::from_static(&[0, 1, 2])), "f").unwrap();
    put_nullable_bytes(&mut out, Some(&Bytes::new()), "g").unwrap();
    put_nullable_bytes(&mut out, None, "h").unwrap();
    put_array(&mut out, &[1i32, -1, 300], "i", |b, v| {
        b.put_i32(*v);
        Ok(())
    })
    .unwrap();
    put_array(&mut out, &[] as &[i32], "j", |_, _| Ok(())).unwrap();
    put_empty_tagged_fields(&mut out);
    let mut b = out.freeze();

    assert_eq!(get_string(&mut b, "a").unwrap(), "h\u{e9}llo \u{1f600}");
    assert_eq!(get_string(&mut b, "b").unwrap(), "");
    assert_eq!(get_nullable_string(&mut b, "c").unwrap(), None);
    assert_eq!(get_nullable_string(&mut b, "d").unwrap().as_deref(), Some("x"));
    assert_eq!(get_string(&mut b, "e").unwrap().len(), MAX_STRING_LEN);
    assert_eq!(get_nullable_bytes(&mut b, "f").unwrap().as_deref(), Some(&[0u8, 1, 2][..]));
    assert_eq!(get_nullable_bytes(&mut b, "g").unwrap().as_deref(), Some(&[][..]));
    assert_eq!(get_nullable_bytes(&mut b, "h").unwrap(), None);
    assert_eq!(get_array(&mut b, "i", |b| get_i32(b, "v")).unwrap(), vec![1, -1, 300]);
    assert_eq!(get_array(&mut b, "j", |b| get_i32(b, "v")).unwrap(), Vec::<i32>::new());
    skip_tagged_fields(&mut b, "k").unwrap();
    assert!(b.is_empty());
}

#[test]
fn every_truncation_of_an_encoding_is_a_truncated_error() {
    let mut out = BytesMut::new();
    put_nullable_string(&mut out, Some("name"), "s").unwrap();
    put_array(&mut out, &[7i64, 8], "a", |b, v| {
        b.put_i64(*v);
        put_empty_tagged_fields(b);
        Ok(())
    })
    .unwrap();
    put_nullable_bytes(&mut out, Some(&Bytes::from_static(b"records")), "r").unwrap();
    put_uuid(&mut out, &Uuid::from_u128(1));
    let full = out.freeze();
    let read = |b: &mut Bytes| -> Result<(), CodecError> {
        get_nullable_string(b, "s")?;
        get_array(b, "a", |b| {
            let v = get_i64(b, "v")?;
            skip_tagged_fields(b, "t")?;
            Ok(v)
        })?;
        get_nullable_bytes(b, "r")?;
        get_uuid(b, "u")?;
        Ok(())
    };
    read(&mut full.clone()).unwrap();
    for cut in 0..full.len() {
        let r = decode_whole(&mut full.slice(..cut), "m", read);
        assert!(matches!(r, Err(CodecError::Truncated { .. })), "cut at {cut}: {r:?}");
    }
}

#[test]
fn lengths_a_java_int_would_read_as_negative_are_refused_without_allocating() {
    // Raw 0x8000_0000 is N + 1 with N = 2^31 - 1; raw 0xffff_ffff is N = -2 as a Java int.
    for raw in [0x8000_0000u32, u32::MAX] {
        let mut prefix = BytesMut::new();
        put_uvarint(&mut prefix, raw);
        let prefix = prefix.freeze();
        assert!(matches!(get_string(&mut prefix.clone(), "s"), Err(CodecError::Invalid { .. })));
        assert!(matches!(get_nullable_string(&mut prefix.clone(), "s"), Err(CodecError::Invalid { .. })));
        assert!(matches!(get_nullable_bytes(&mut prefix.clone(), "b"), Err(CodecError::Truncated { .. })));
        // Elements that take no bytes: only the buffer running out stops the loop, and the
        // pre-allocation is capped by the bytes left (none).
        let mut calls = 0u32;
        let r = get_array(&mut prefix.clone(), "a", |b| {
            calls += 1;
            if calls > 3 {
                get_i8(b, "x")
            } else {
                Ok(0)
            }
        });
        assert!(matches!(r, Err(CodecError::Truncated { .. })), "{r:?}");
    }
}

#[test]
fn the_writer_refuses_lengths_that_do_not_fit_a_java_int() {
    // A slice of unit values takes no memory, whatever its length.
    let units = vec![(); i32::MAX as usize];
    let mut out = BytesMut::new();
    let r = put_array(&mut out, &units, "a", |_, _| Ok(()));
    assert!(matches!(r, Err(CodecError::Invalid { what: "a", .. })), "{r:?}");
    assert!(out.is_empty(), "nothing written for a refused length");
    assert!(put_compact_len(&mut out, usize::MAX, "a").is_err());
    put_compact_len(&mut out, i32::MAX as usize - 1, "a").unwrap();
    assert_eq!(get_compact_len(&mut out.freeze(), "a"), Ok(Some(i32::MAX as usize - 1)));
}

#[test]
fn nullable_bytes_are_zero_copy() {
    let input = bytes(&[4, 1, 2, 3, 9]);
    let mut b = input.clone();
    let got = get_nullable_bytes(&mut b, "r").unwrap().unwrap();
    assert_eq!(&got[..], &[1, 2, 3]);
    assert_eq!(got.as_ptr(), input[1..].as_ptr());
    assert_eq!(&b[..], &[9]);
}

#[test]
fn huge_array_count_does_not_allocate_or_panic() {
    // Count 0xffff_fffe elements, then nothing.
    let mut b = bytes(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
    let r = get_array(&mut b, "a", |b| get_i32(b, "x"));
    assert!(matches!(r, Err(CodecError::Truncated { .. })));
}

#[test]
fn tagged_fields_are_offered_then_skipped() {
    // Two fields: tag 0 with [0xaa], tag 5 with [0xbb, 0xcc]; then a trailing byte.
    let mut b = bytes(&[2, 0, 1, 0xaa, 5, 2, 0xbb, 0xcc, 0x42]);
    let mut seen = Vec::new();
    get_tagged_fields(&mut b, "t", |tag, data| {
        seen.push((tag, data.to_vec()));
        Ok(())
    })
    .unwrap();
    assert_eq!(seen, vec![(0, vec![0xaa]), (5, vec![0xbb, 0xcc])]);
    assert_eq!(&b[..], &[0x42]);
    assert!(skip_tagged_fields(&mut bytes(&[1, 0, 5, 1]), "t").is_err());
    // A huge count fails on truncation.
    assert!(matches!(
        skip_tagged_fields(&mut bytes(&[0xff, 0xff, 0xff, 0xff, 0x0f, 0, 0]), "t"),
        Err(CodecError::Truncated { .. })
    ));
}

#[test]
fn decode_whole_wants_every_byte_and_leaves_the_input_alone_on_error() {
    let mut b = bytes(&[0, 0, 0, 5, 9]);
    assert_eq!(decode_whole(&mut b, "m", |b| get_i32(b, "x")), Err(CodecError::TrailingBytes { what: "m", extra: 1 }));
    assert_eq!(b.len(), 5);
    let mut b = bytes(&[0, 0, 0, 5]);
    assert_eq!(decode_whole(&mut b, "m", |b| get_i32(b, "x")), Ok(5));
    assert!(b.is_empty());
}

proptest! {
    #[test]
    fn no_input_makes_a_reader_panic(input in prop::collection::vec(any::<u8>(), 0..64)) {
        let b = Bytes::from(input.clone());
        let _ = get_uvarint(&mut b.clone(), "v");
        for policy in [Overflow::Reject, Overflow::DropBits, Overflow::AsCrate] {
            let _ = get_uvarint_with(&mut &input[..], "v", policy);
        }
        let _ = get_string(&mut b.clone(), "s");
        let _ = get_nullable_string(&mut b.clone(), "s");
        let _ = get_nullable_bytes(&mut b.clone(), "b");
        let _ = get_array(&mut b.clone(), "a", |b| get_nullable_string(b, "e"));
        let _ = get_tagged_fields(&mut b.clone(), "t", |_, mut p| get_i32(&mut p, "p").map(|_| ()));
        let _ = get_uuid(&mut &input[..], "u");
    }

    #[test]
    fn varints_and_strings_round_trip(v in any::<u32>(), s in ".{0,40}", n in prop::option::of(".{0,8}")) {
        let mut out = BytesMut::new();
        put_uvarint(&mut out, v);
        put_string(&mut out, &s, "s").unwrap();
        put_nullable_string(&mut out, n.as_deref(), "n").unwrap();
        let mut b = out.freeze();
        prop_assert_eq!(get_uvarint(&mut b, "v").unwrap(), v);
        prop_assert_eq!(get_string(&mut b, "s").unwrap(), s);
        prop_assert_eq!(get_nullable_string(&mut b, "n").unwrap(), n);
        prop_assert!(b.is_empty());
    }
}
