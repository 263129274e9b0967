//! Names in the profile text (v3): whatever would break a line or a field is written `%XX`.

use std::borrow::Cow;

/// A name as the profile writes it (v3): `%XX` for each byte of whitespace, control characters
/// and `%`; other names as they are. Also used for the names in `# fn-hash` headers.
pub fn escaped(name: &str) -> Cow<'_, str> {
    let needs = |c: char| c.is_whitespace() || c.is_control() || c == '%';
    if !name.contains(needs) {
        return Cow::Borrowed(name);
    }
    let mut out = String::with_capacity(name.len() + 8);
    for c in name.chars() {
        if needs(c) {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("%{b:02X}"));
            }
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// The name [`escaped`] wrote; an error for a `%` not followed by two hex digits.
pub(crate) fn unescaped(token: &str) -> Result<Cow<'_, str>, String> {
    if !token.contains('%') {
        return Ok(Cow::Borrowed(token));
    }
    let bytes = token.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let byte = token
                .get(i + 1..i + 3)
                .and_then(|hex| u8::from_str_radix(hex, 16).ok())
                .ok_or_else(|| {
                    format!("name '{token}' has a '%' not followed by two hex digits")
                })?;
            out.push(byte);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out)
        .map(Cow::Owned)
        .map_err(|_| format!("name '{token}' does not decode to UTF-8"))
}

/// The format a written profile declares: its first line without `# ` (`hottext profile v2`),
/// what a meta file records.
pub fn declared_format(bytes: &[u8]) -> String {
    let first = bytes.split(|&b| b == b'\n').next().unwrap_or_default();
    String::from_utf8_lossy(first)
        .trim_start_matches("# ")
        .to_string()
}
