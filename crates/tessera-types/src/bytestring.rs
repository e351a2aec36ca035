//! A string value: any bytes, as in HyperDex, where a `string` is a byte string.
//!
//! Most strings are UTF-8 text, and the text accessors say whether one is; but a key-value
//! store must give back the bytes it was given, so nothing here requires it. Strings order and
//! compare bytewise. On the wire and on disk a string is its length and its bytes (postcard's
//! encoding of both `str` and bytes), so the stores written when strings had to be UTF-8 read
//! unchanged.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The bytes of a `string` value. Shared, never changed in place: an object is copied several
/// times on its way down a chain (pending state, the message to the next hop, the storage
/// write), and a copy of a string is a reference count, not an allocation.
#[derive(Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ByteString(Arc<[u8]>);

impl ByteString {
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.0.to_vec()
    }

    /// The text, when the bytes are UTF-8.
    pub fn as_str(&self) -> Option<&str> {
        std::str::from_utf8(&self.0).ok()
    }

    /// The text, with any bytes that are not UTF-8 replaced (U+FFFD): for messages, never for
    /// data that goes back to a user.
    pub fn to_text_lossy(&self) -> std::borrow::Cow<'_, str> {
        String::from_utf8_lossy(&self.0)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `first` then `second`.
    pub fn concat(first: &ByteString, second: &ByteString) -> ByteString {
        let mut bytes = Vec::with_capacity(first.len() + second.len());
        bytes.extend_from_slice(&first.0);
        bytes.extend_from_slice(&second.0);
        ByteString(bytes.into())
    }

    pub fn starts_with(&self, prefix: &[u8]) -> bool {
        self.0.starts_with(prefix)
    }
}

impl From<&str> for ByteString {
    fn from(s: &str) -> Self {
        ByteString(s.as_bytes().into())
    }
}

impl From<String> for ByteString {
    fn from(s: String) -> Self {
        ByteString(s.into_bytes().into())
    }
}

impl From<Vec<u8>> for ByteString {
    fn from(bytes: Vec<u8>) -> Self {
        ByteString(bytes.into())
    }
}

impl From<&[u8]> for ByteString {
    fn from(bytes: &[u8]) -> Self {
        ByteString(bytes.into())
    }
}

impl PartialEq<str> for ByteString {
    fn eq(&self, other: &str) -> bool {
        *self.0 == *other.as_bytes()
    }
}

impl PartialEq<&str> for ByteString {
    fn eq(&self, other: &&str) -> bool {
        *self.0 == *other.as_bytes()
    }
}

impl fmt::Debug for ByteString {
    /// Text as a quoted string; other bytes as a byte-string literal (`b"\xff"`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.as_str() {
            Some(text) => write!(f, "{text:?}"),
            None => write!(f, "b\"{}\"", self.0.escape_ascii()),
        }
    }
}

impl Serialize for ByteString {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bytes(&self.0)
    }
}

impl<'de> Deserialize<'de> for ByteString {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = ByteString;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a byte string")
            }

            fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<ByteString, E> {
                Ok(ByteString(v.into()))
            }

            fn visit_byte_buf<E: serde::de::Error>(self, v: Vec<u8>) -> Result<ByteString, E> {
                Ok(ByteString(v.into()))
            }

            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<ByteString, E> {
                Ok(ByteString::from(v))
            }

            fn visit_string<E: serde::de::Error>(self, v: String) -> Result<ByteString, E> {
                Ok(ByteString::from(v))
            }
        }
        deserializer.deserialize_byte_buf(Visitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The stores and frames written while strings were Rust `String`s read the same.
    #[test]
    fn encodes_as_a_str_did() {
        for text in ["", "Paris", "naïve", "日本"] {
            let old = postcard::to_allocvec(text).unwrap();
            assert_eq!(postcard::to_allocvec(&ByteString::from(text)).unwrap(), old);
            assert_eq!(
                postcard::from_bytes::<ByteString>(&old).unwrap(),
                ByteString::from(text)
            );
        }
        let raw = ByteString::from(vec![0xff, 0x00, b'a']);
        let bytes = postcard::to_allocvec(&raw).unwrap();
        assert_eq!(postcard::from_bytes::<ByteString>(&bytes).unwrap(), raw);
    }

    #[test]
    fn text_and_other_bytes_are_shown_apart() {
        assert_eq!(format!("{:?}", ByteString::from("a\"b")), r#""a\"b""#);
        assert_eq!(
            format!("{:?}", ByteString::from(vec![0xff, b'a'])),
            r#"b"\xffa""#
        );
        assert_eq!(ByteString::from(vec![0xff]).as_str(), None);
        assert_eq!(ByteString::from("é").as_str(), Some("é"));
    }
}
