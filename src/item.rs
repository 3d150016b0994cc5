//! Items: the JSON objects legs extract from pages and the sink stores.
//!
//! An item is a JSON object. It is stored as one [`FORMAT_VERSION`] byte followed
//! by its JSON text. Depends on nothing else in the crate.

/// One extracted record: a JSON object.
pub type Item = serde_json::Map<String, serde_json::Value>;

/// Version byte written before every stored item.
pub const FORMAT_VERSION: u8 = 1;

/// Why a stored item could not be read.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// The record is empty.
    #[error("empty item record")]
    Empty,
    /// The record was written by another format version.
    #[error("item record has format version {found}, this build reads version {FORMAT_VERSION}")]
    Version {
        /// The version byte found.
        found: u8,
    },
    /// The JSON after the version byte is invalid.
    #[error("corrupt item record: {0}")]
    Corrupt(#[from] serde_json::Error),
}

/// The stored form of an item: version byte, then compact JSON.
pub fn encode(item: &Item) -> Vec<u8> {
    let mut out = vec![FORMAT_VERSION];
    if let Err(error) = serde_json::to_writer(&mut out, item) {
        unreachable!("serializing a JSON map into memory failed: {error}");
    }
    out
}

/// Reads an item written by [`encode`].
pub fn decode(bytes: &[u8]) -> Result<Item, DecodeError> {
    let (&version, rest) = bytes.split_first().ok_or(DecodeError::Empty)?;
    if version != FORMAT_VERSION {
        return Err(DecodeError::Version { found: version });
    }
    Ok(serde_json::from_slice(rest)?)
}

/// The JSON text of a stored item without re-serializing it (for `dump items`).
pub fn json_text(bytes: &[u8]) -> Result<&str, DecodeError> {
    let (&version, rest) = bytes.split_first().ok_or(DecodeError::Empty)?;
    if version != FORMAT_VERSION {
        return Err(DecodeError::Version { found: version });
    }
    std::str::from_utf8(rest).map_err(|e| DecodeError::Corrupt(serde::de::Error::custom(e)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_errors() {
        let mut item = Item::new();
        item.insert("url".into(), "http://e.com/".into());
        let bytes = encode(&item);
        assert_eq!(decode(&bytes).unwrap(), item);
        assert_eq!(json_text(&bytes).unwrap(), r#"{"url":"http://e.com/"}"#);
        assert!(matches!(
            decode(&[2, b'{']),
            Err(DecodeError::Version { found: 2 })
        ));
        assert!(matches!(decode(&[1, b'{']), Err(DecodeError::Corrupt(_))));
    }
}
