//! Which share groups the exporter exports: all of them, those matching a pattern, or a list.

use regex::Regex;

use crate::error::{Error, Result};

/// Which share groups to export.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub enum GroupFilter {
    /// Every share group of the cluster.
    #[default]
    All,
    /// Groups whose whole id matches the pattern (Rust `regex` syntax, anchored at both ends).
    Pattern(Regex),
    /// Exactly these groups, described by name without listing the cluster's: one that does
    /// not exist (yet), or that this principal may not describe, is not exported and counts
    /// as an error of its kind.
    List(Vec<String>),
}

impl GroupFilter {
    /// A filter on a pattern the whole id must match.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the pattern does not compile.
    pub fn pattern(p: &str) -> Result<GroupFilter> {
        Regex::new(&format!("^(?:{p})$")).map(GroupFilter::Pattern).map_err(|e| {
            // The regex error quotes the pattern: cut both.
            let e = e.to_string();
            Error::InvalidArgument(format!(
                "group pattern {} is not a valid regular expression: {}",
                super::shown(p),
                super::cut(&e, 1024)
            ))
        })
    }

    /// Whether `group` is exported.
    pub fn admits(&self, group: &str) -> bool {
        match self {
            GroupFilter::All => true,
            GroupFilter::Pattern(r) => r.is_match(group),
            GroupFilter::List(l) => l.iter().any(|g| g == group),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pattern_matches_whole_ids_only() {
        let f = GroupFilter::pattern("orders-.*").unwrap();
        assert!(f.admits("orders-eu"));
        assert!(!f.admits("old-orders-eu"));
        assert!(GroupFilter::pattern("(").is_err());
        let l = GroupFilter::List(vec!["a".into()]);
        assert!(l.admits("a") && !l.admits("ab"));
        assert!(GroupFilter::All.admits("anything"));
    }
}
