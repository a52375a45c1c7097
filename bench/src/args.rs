//! The one argument parser of every subcommand: `--key value` pairs after the subcommand's
//! name (and its mode, for those that have modes: `scale drain`, `failover setup`).

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// `--key value` pairs; the last value of a key counts (`all` gives every one).
pub struct Args {
    pairs: Vec<(String, String)>,
}

impl Args {
    pub fn parse(raw: impl IntoIterator<Item = String>) -> Result<Args, BoxError> {
        let mut pairs = Vec::new();
        let mut it = raw.into_iter();
        while let Some(k) = it.next() {
            let key = k.strip_prefix("--").ok_or_else(|| format!("unexpected argument {k:?}"))?.to_string();
            let v = it.next().ok_or_else(|| format!("--{key} needs a value"))?;
            pairs.push((key, v));
        }
        Ok(Args { pairs })
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.pairs.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    pub fn all(&self, key: &str) -> Vec<&str> {
        self.pairs.iter().filter(|(k, _)| k == key).map(|(_, v)| v.as_str()).collect()
    }

    pub fn req(&self, key: &str) -> Result<&str, BoxError> {
        self.get(key).ok_or_else(|| format!("--{key} is required").into())
    }

    pub fn num<T: std::str::FromStr>(&self, key: &str, default: T) -> Result<T, BoxError> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => v.parse().map_err(|_| format!("--{key} {v:?} is not a number").into()),
        }
    }
}
