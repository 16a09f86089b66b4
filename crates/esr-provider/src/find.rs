//! `find.name.regexp` matching, as ESO's `runtime/find` does it (Go RE2, unanchored `MatchString`).

use regex::Regex;

use crate::error::ProviderError;

/// Matches secret names against `find.name.regexp`.
#[derive(Clone, Debug)]
pub struct NameMatcher {
    re: Regex,
}

impl NameMatcher {
    /// Compiles the regexp. Error text: `could not compile find.name.regexp [RE]: ...`.
    pub fn new(regexp: &str) -> Result<Self, ProviderError> {
        Regex::new(regexp)
            .map(|re| NameMatcher { re })
            .map_err(|e| {
                ProviderError::invalid(format!(
                    "could not compile find.name.regexp [{regexp}]: {e}"
                ))
            })
    }

    /// True when the name matches anywhere (unanchored, like Go's `MatchString`).
    pub fn matches(&self, name: &str) -> bool {
        self.re.is_match(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unanchored_match() {
        let m = NameMatcher::new("db-.*").unwrap_or_else(|e| panic!("{e}"));
        assert!(m.matches("db-one"));
        assert!(m.matches("prod-db-one"));
        assert!(!m.matches("cache"));
        let anchored = NameMatcher::new("^db$").unwrap_or_else(|e| panic!("{e}"));
        assert!(anchored.matches("db"));
        assert!(!anchored.matches("db2"));
    }

    #[test]
    fn bad_regexp_is_invalid() {
        let e = NameMatcher::new("(")
            .err()
            .unwrap_or_else(|| panic!("expected error"));
        assert!(
            e.to_string()
                .starts_with("could not compile find.name.regexp [(]:")
        );
        assert_eq!(e.kind(), crate::error::ErrorKind::Invalid);
    }
}
