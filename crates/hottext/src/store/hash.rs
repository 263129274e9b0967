//! The name of a stored object: the SHA-256 of its bytes.

use std::fmt;
use std::str::FromStr;

use sha2::{Digest, Sha256};

/// SHA-256 of an object's content, shown as `sha256:<64 hex digits>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectHash([u8; 32]);

impl ObjectHash {
    /// The hash of `bytes`.
    pub fn of(bytes: &[u8]) -> ObjectHash {
        ObjectHash(Sha256::digest(bytes).into())
    }

    /// The 64 hex digits, without the `sha256:` prefix (object keys and file names).
    pub fn hex(&self) -> String {
        crate::binary::hex(&self.0)
    }
}

impl fmt::Display for ObjectHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", self.hex())
    }
}

/// Why a text is not an object hash.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{text}' is not an object hash: {msg} (expected sha256: and 64 hex digits)")]
pub struct BadHash {
    /// The text as given.
    pub text: String,
    /// What is wrong with it (a missing digit, a non-hex one).
    pub msg: &'static str,
}

impl FromStr for ObjectHash {
    type Err = BadHash;

    /// Accepts `sha256:<hex>` and bare hex; hex digits in either case.
    fn from_str(text: &str) -> Result<ObjectHash, BadHash> {
        let bad = |msg| BadHash {
            text: text.to_string(),
            msg,
        };
        let hex = match text.split_once(':') {
            Some(("sha256", hex)) => hex,
            Some(_) => return Err(bad("only sha256 is supported")),
            None => text,
        };
        if hex.len() != 64 {
            return Err(bad("wrong length"));
        }
        let mut out = [0u8; 32];
        for (i, pair) in hex.as_bytes().chunks(2).enumerate() {
            let digit = |c: u8| (c as char).to_digit(16).ok_or_else(|| bad("not hex"));
            out[i] = (digit(pair[0])? << 4 | digit(pair[1])?) as u8;
        }
        Ok(ObjectHash(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_of_empty_input_is_the_known_value() {
        let h = ObjectHash::of(b"");
        assert_eq!(
            h.to_string(),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(h.to_string().parse::<ObjectHash>(), Ok(h));
        assert_eq!(h.hex().to_uppercase().parse::<ObjectHash>(), Ok(h));
    }

    #[test]
    fn malformed_hashes_are_refused_with_a_reason() {
        assert_eq!(
            "sha256:abc".parse::<ObjectHash>().unwrap_err().msg,
            "wrong length"
        );
        let not_hex = format!("sha256:{}", "g".repeat(64));
        assert_eq!(not_hex.parse::<ObjectHash>().unwrap_err().msg, "not hex");
        let md5 = format!("md5:{}", "0".repeat(64));
        assert!(md5.parse::<ObjectHash>().is_err());
    }
}
