//! `sasl.jaas.config` as Java and Confluent Cloud write it:
//!
//! ```text
//! org.apache.kafka.common.security.plain.PlainLoginModule required username="key" password="secret";
//! ```
//!
//! One login module (Kafka clients accept exactly one), a control flag, `key=value` options
//! and a closing `;`. Values are quoted (`\"` and `\\` escapes) or bare words. Whitespace
//! includes newlines, and `//` and `/* */` comments are skipped outside quotes, as Java's
//! tokenizer does.
//!
//! Line continuations: a properties file may split the value over lines with a trailing
//! `\`. Depending on the reader, the value then holds a newline (and the next line's
//! indentation) or a backslash-newline. Outside quotes both are whitespace. Inside quotes they
//! are dropped together with the indentation that follows, which is what Java's properties
//! reader does when it joins the lines.
//!
//! Errors name positions and option keys, never values: a value may be a password.

use std::collections::BTreeMap;
use std::fmt;

use crate::error::{Error, Result};

const KEY: &str = "sasl.jaas.config";
const SHAPE: &str = "expected `<LoginModule class> required key=\"value\" ...;`, e.g. \
    `org.apache.kafka.common.security.plain.PlainLoginModule required username=\"u\" password=\"p\";`";

/// The login modules Kafka clients use (shaded class names such as
/// `kafkashaded.org.apache...PlainLoginModule` are recognised by their simple name).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoginModule {
    /// `org.apache.kafka.common.security.plain.PlainLoginModule`: mechanism PLAIN.
    Plain,
    /// `org.apache.kafka.common.security.scram.ScramLoginModule`: SCRAM-SHA-256 / -512.
    Scram,
    /// `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule`: OAUTHBEARER.
    OAuthBearer,
}

impl LoginModule {
    /// The class name Java uses.
    pub fn class_name(self) -> &'static str {
        match self {
            LoginModule::Plain => "org.apache.kafka.common.security.plain.PlainLoginModule",
            LoginModule::Scram => "org.apache.kafka.common.security.scram.ScramLoginModule",
            LoginModule::OAuthBearer => "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule",
        }
    }
}

/// The JAAS control flag. Kafka clients use `required`; the others are accepted because Java
/// accepts them, and mean the same with a single module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControlFlag {
    /// `required`
    Required,
    /// `requisite`
    Requisite,
    /// `sufficient`
    Sufficient,
    /// `optional`
    Optional,
}

/// A parsed `sasl.jaas.config`. `Debug` shows the option keys only: values may be secrets.
#[derive(Clone, PartialEq, Eq)]
pub struct JaasConfig {
    /// Which login module.
    pub module: LoginModule,
    /// Its control flag.
    pub flag: ControlFlag,
    options: BTreeMap<String, String>,
}

impl JaasConfig {
    /// Parses the value of `sasl.jaas.config`.
    pub fn parse(text: &str) -> Result<JaasConfig> {
        Parser { chars: text.chars().collect(), pos: 0 }.config()
    }

    /// The value of an option. Wrap passwords and tokens in [`super::Secret`] at once.
    pub fn option(&self, key: &str) -> Option<&str> {
        self.options.get(key).map(|s| s.as_str())
    }

    /// The option keys, sorted.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.options.keys().map(|s| s.as_str())
    }

    /// Options whose key starts with `prefix`, with the prefix removed (e.g. `extension_`).
    pub fn options_with_prefix<'a>(&'a self, prefix: &'a str) -> impl Iterator<Item = (&'a str, &'a str)> + 'a {
        self.options.iter().filter_map(move |(k, v)| k.strip_prefix(prefix).map(|rest| (rest, v.as_str())))
    }
}

impl fmt::Debug for JaasConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JaasConfig")
            .field("module", &self.module)
            .field("flag", &self.flag)
            .field("option_keys", &self.options.keys().collect::<Vec<_>>())
            .finish()
    }
}

fn err(message: impl Into<String>) -> Error {
    Error::config(KEY, message)
}

/// Whether a token is safe to quote in an error: a class or key name, not a value.
fn printable_name(s: &str) -> bool {
    !s.is_empty() && s.len() <= 120 && s.chars().all(|c| c.is_ascii_alphanumeric() || "._$-".contains(c))
}

struct Parser {
    chars: Vec<char>,
    pos: usize,
}

impl Parser {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn peek_at(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.pos + ahead).copied()
    }

    /// Skips whitespace, backslash-newline continuations and comments.
    fn skip_blank(&mut self) -> Result<()> {
        loop {
            match (self.peek(), self.peek_at(1)) {
                (Some(c), _) if c.is_whitespace() => self.pos += 1,
                (Some('\\'), Some('\n' | '\r')) => self.pos += 1,
                (Some('/'), Some('/')) => {
                    while self.peek().is_some_and(|c| c != '\n') {
                        self.pos += 1;
                    }
                }
                (Some('/'), Some('*')) => {
                    let start = self.pos;
                    self.pos += 2;
                    loop {
                        match (self.peek(), self.peek_at(1)) {
                            (Some('*'), Some('/')) => {
                                self.pos += 2;
                                break;
                            }
                            (Some(_), _) => self.pos += 1,
                            (None, _) => return Err(err(format!("the comment at character {start} is not closed"))),
                        }
                    }
                }
                _ => return Ok(()),
            }
        }
    }

    /// A bare word: up to whitespace, `=`, `;` or a quote.
    fn word(&mut self) -> String {
        let start = self.pos;
        while self.peek().is_some_and(|c| !c.is_whitespace() && !"=;\"".contains(c)) {
            self.pos += 1;
        }
        self.chars[start..self.pos].iter().collect()
    }

    /// An unquoted value: up to whitespace or `;`. It may hold `=` (base64 padding).
    fn bare_value(&mut self) -> String {
        let start = self.pos;
        while self.peek().is_some_and(|c| !c.is_whitespace() && c != ';') {
            self.pos += 1;
        }
        self.chars[start..self.pos].iter().collect()
    }

    fn config(mut self) -> Result<JaasConfig> {
        self.skip_blank()?;
        if self.peek().is_none() {
            return Err(err(format!("the value is empty; {SHAPE}")));
        }
        let class = self.word();
        let module = module_of(&class)?;
        self.skip_blank()?;
        let flag_word = self.word();
        let flag = match flag_word.to_ascii_lowercase().as_str() {
            "required" => ControlFlag::Required,
            "requisite" => ControlFlag::Requisite,
            "sufficient" => ControlFlag::Sufficient,
            "optional" => ControlFlag::Optional,
            "" => return Err(err(format!("the control flag (`required`) is missing after the login module; {SHAPE}"))),
            other => {
                let shown = if printable_name(other) { format!("{other:?}") } else { "the word".to_string() };
                return Err(err(format!(
                    "{shown} after the login module is not a control flag: use `required`; {SHAPE}"
                )));
            }
        };
        let mut options = BTreeMap::new();
        loop {
            self.skip_blank()?;
            match self.peek() {
                None => return Err(err(format!("the closing `;` is missing; {SHAPE}"))),
                Some(';') => {
                    self.pos += 1;
                    break;
                }
                Some(_) => {}
            }
            let at = self.pos;
            let key = self.word();
            if !printable_name(&key) {
                return Err(err(format!(
                    "expected an option name (letters, digits, `_`, `.`, `-`) at character {at}; {SHAPE}"
                )));
            }
            self.skip_blank()?;
            if self.peek() != Some('=') {
                return Err(err(format!("option `{key}` has no `=value`; write {key}=\"...\"")));
            }
            self.pos += 1;
            self.skip_blank()?;
            let value = match self.peek() {
                Some(q @ ('"' | '\'')) => self.quoted(&key, q)?,
                Some(';') | None => return Err(err(format!("option `{key}` has no value after `=`"))),
                Some(_) => self.bare_value(),
            };
            if options.insert(key.clone(), value).is_some() {
                return Err(err(format!("option `{key}` is given twice; keep one")));
            }
        }
        self.skip_blank()?;
        if self.peek().is_some() {
            return Err(err(format!(
                "text follows the closing `;` at character {}: Kafka clients take exactly one login module",
                self.pos
            )));
        }
        Ok(JaasConfig { module, flag, options })
    }

    /// A `"..."` or `'...'` value (Java's tokenizer takes both; Confluent Cloud's files use
    /// single quotes), the opening quote under the cursor.
    fn quoted(&mut self, key: &str, quote: char) -> Result<String> {
        self.pos += 1;
        let mut out = String::new();
        loop {
            match self.peek() {
                None => return Err(err(format!("the quoted value of option `{key}` is not closed with `{quote}`"))),
                Some(c) if c == quote => {
                    self.pos += 1;
                    return Ok(out);
                }
                Some('\\') => {
                    self.pos += 1;
                    match self.peek() {
                        None => {
                            return Err(err(format!("the quoted value of option `{key}` ends in a lone `\\`")));
                        }
                        Some('\n' | '\r') => self.skip_continuation(),
                        Some(c) => {
                            self.pos += 1;
                            out.push(match c {
                                'n' => '\n',
                                't' => '\t',
                                'r' => '\r',
                                other => other,
                            });
                        }
                    }
                }
                Some('\n' | '\r') => self.skip_continuation(),
                Some(c) => {
                    self.pos += 1;
                    out.push(c);
                }
            }
        }
    }

    /// Drops a line break and the next line's indentation (a joined properties line).
    fn skip_continuation(&mut self) {
        if self.peek() == Some('\r') {
            self.pos += 1;
        }
        if self.peek() == Some('\n') {
            self.pos += 1;
        }
        while self.peek().is_some_and(|c| c == ' ' || c == '\t') {
            self.pos += 1;
        }
    }
}

fn module_of(class: &str) -> Result<LoginModule> {
    if class.is_empty() {
        return Err(err(format!("the login module class is missing; {SHAPE}")));
    }
    let simple = class.rsplit('.').next().unwrap_or(class);
    match simple {
        "PlainLoginModule" => Ok(LoginModule::Plain),
        "ScramLoginModule" => Ok(LoginModule::Scram),
        "OAuthBearerLoginModule" => Ok(LoginModule::OAuthBearer),
        "Krb5LoginModule" => {
            Err(err("Kerberos (Krb5LoginModule, sasl.mechanism=GSSAPI) is not supported: use PLAIN, SCRAM-SHA-256, \
             SCRAM-SHA-512 or OAUTHBEARER"))
        }
        _ if printable_name(class) && class.contains('.') => Err(err(format!(
            "unknown login module {class:?}: use PlainLoginModule, ScramLoginModule or OAuthBearerLoginModule \
             (org.apache.kafka.common.security...)"
        ))),
        _ => Err(err(format!("the value does not start with a login module class; {SHAPE}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> JaasConfig {
        JaasConfig::parse(s).unwrap_or_else(|e| panic!("{s:?}: {e}"))
    }

    fn error(s: &str) -> String {
        match JaasConfig::parse(s) {
            Ok(c) => panic!("{s:?} parsed: {c:?}"),
            Err(e) => {
                let text = e.to_string();
                assert!(matches!(e, Error::Config { ref key, .. } if key == KEY), "{text}");
                text
            }
        }
    }

    #[test]
    fn confluent_cloud_plain() {
        let c = parse(
            "org.apache.kafka.common.security.plain.PlainLoginModule required username='ABC' password='x';"
                .replace('\'', "\"")
                .as_str(),
        );
        assert_eq!(c.module, LoginModule::Plain);
        assert_eq!(c.flag, ControlFlag::Required);
        assert_eq!(c.option("username"), Some("ABC"));
        assert_eq!(c.option("password"), Some("x"));
        assert_eq!(c.keys().collect::<Vec<_>>(), ["password", "username"]);
        // Confluent Cloud's files quote with single quotes, which Java's tokenizer takes too.
        let c =
            parse(r#"org.apache.kafka.common.security.plain.PlainLoginModule required username='ABC' password='x"y';"#);
        assert_eq!(c.option("username"), Some("ABC"));
        assert_eq!(c.option("password"), Some("x\"y"));
    }

    #[test]
    fn scram_and_shaded_class_names() {
        let c =
            parse(r#"org.apache.kafka.common.security.scram.ScramLoginModule REQUIRED username="u" password="p" ;"#);
        assert_eq!(c.module, LoginModule::Scram);
        let c = parse(
            r#"kafkashaded.org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";"#,
        );
        assert_eq!(c.module, LoginModule::Plain);
    }

    #[test]
    fn oauthbearer_options() {
        let c = parse(
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required \
             unsecuredLoginStringClaim_sub=\"alice\" clientId=\"id\" clientSecret=\"s\" scope=\"kafka\" \
             extension_logicalCluster=\"lkc-1\" extension_identityPoolId=\"pool-2\";",
        );
        assert_eq!(c.module, LoginModule::OAuthBearer);
        assert_eq!(c.option("unsecuredLoginStringClaim_sub"), Some("alice"));
        assert_eq!(c.option("clientSecret"), Some("s"));
        let ext: Vec<_> = c.options_with_prefix("extension_").collect();
        assert_eq!(ext, [("identityPoolId", "pool-2"), ("logicalCluster", "lkc-1")]);
    }

    #[test]
    fn escapes_and_bare_values() {
        let c = parse(r#"x.PlainLoginModule required username=bare password="a\"b\\c=d;e f" tries=3;"#);
        assert_eq!(c.option("username"), Some("bare"));
        assert_eq!(c.option("password"), Some(r#"a"b\c=d;e f"#));
        assert_eq!(c.option("tries"), Some("3"));
        // A bare value may hold `=` (base64 padding) and ends at `;`.
        let c = parse("x.PlainLoginModule required username=u password=abc==;");
        assert_eq!(c.option("password"), Some("abc=="));
        assert_eq!(c.option("username"), Some("u"));
    }

    #[test]
    fn newlines_continuations_and_comments() {
        // Lines joined with their newlines and indentation kept.
        let c = parse(
            "org.apache.kafka.common.security.plain.PlainLoginModule required \n    username=\"u\"\r\n\
             \tpassword=\"p\" // why not\n /* a comment */ ;\n",
        );
        assert_eq!((c.option("username"), c.option("password")), (Some("u"), Some("p")));
        // Backslash-newline left in by a reader that does not join lines.
        let c = parse("x.PlainLoginModule required \\\n    username=\"u\" \\\n    password=\"p\";");
        assert_eq!((c.option("username"), c.option("password")), (Some("u"), Some("p")));
        // A continuation inside a quoted value joins the two halves, as Java's reader does.
        let c = parse("x.PlainLoginModule required username=\"u\" password=\"abc\\\n    def\";");
        assert_eq!(c.option("password"), Some("abcdef"));
        let c = parse("x.PlainLoginModule required username=\"u\" password=\"abc\n    def\";");
        assert_eq!(c.option("password"), Some("abcdef"));
    }

    #[test]
    fn errors_say_what_is_wrong_and_never_show_values() {
        let secret = "TOPSECRET";
        let cases = [
            ("", "empty"),
            ("x.PlainLoginModule username=\"u\" password=\"TOPSECRET\";", "control flag"),
            ("x.PlainLoginModule required username=\"u\" password=\"TOPSECRET\"", "closing `;`"),
            ("x.PlainLoginModule required username=\"u\" password=\"TOPSECRET;", "not closed"),
            ("x.PlainLoginModule required username \"TOPSECRET\";", "no `=value`"),
            ("x.PlainLoginModule required password=;", "no value"),
            ("x.PlainLoginModule required password=\"TOPSECRET\" password=\"TOPSECRET\";", "twice"),
            ("x.PlainLoginModule required password=\"TOPSECRET\"; y.PlainLoginModule required;", "exactly one"),
            ("com.example.MyLoginModule required password=\"TOPSECRET\";", "unknown login module"),
            ("password=\"TOPSECRET\";", "login module class"),
            ("com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true;", "Kerberos"),
            ("x.PlainLoginModule required \"TOPSECRET\"=x;", "option name"),
            ("x.PlainLoginModule required password=\"TOPSECRET\\", "lone"),
            ("x.PlainLoginModule required /* TOPSECRET", "comment"),
        ];
        for (input, expected) in cases {
            let e = error(input);
            assert!(e.contains(expected), "{input:?}: {e}");
            assert!(!e.contains(secret), "{input:?} leaked: {e}");
        }
        let c = parse("x.PlainLoginModule required username=\"u\" password=\"TOPSECRET\";");
        assert!(!format!("{c:?}").contains(secret));
    }

    proptest::proptest! {
        #[test]
        fn any_text_parses_or_fails_cleanly(text in "\\PC{0,120}") {
            let _ = JaasConfig::parse(&text);
        }

        #[test]
        fn jaas_like_text_parses_or_fails_cleanly(
            body in r#"(x\.PlainLoginModule )?(required )?([a-z]{1,4}(=|==)("[^"]{0,6}"?|[a-z\\";]{0,6}) ?){0,4}(;|/\*|//)?"#
        ) {
            let _ = JaasConfig::parse(&body);
        }
    }
}
