//! HPACK (RFC 7541) for the bench's HTTP/2 client ([`crate::http2`]): a full decoder for the
//! answers' header blocks (static and dynamic table, Huffman strings) and the encoding of the
//! requests' fixed header blocks, which use neither the dynamic table nor Huffman.

use std::collections::VecDeque;

/// A header block the decoder cannot read: the connection is unusable after it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("HPACK: {0}")]
pub struct HpackError(&'static str);

/// RFC 7541 Appendix A.
const STATIC_TABLE: [(&str, &str); 61] = [
    (":authority", ""),
    (":method", "GET"),
    (":method", "POST"),
    (":path", "/"),
    (":path", "/index.html"),
    (":scheme", "http"),
    (":scheme", "https"),
    (":status", "200"),
    (":status", "204"),
    (":status", "206"),
    (":status", "304"),
    (":status", "400"),
    (":status", "404"),
    (":status", "500"),
    ("accept-charset", ""),
    ("accept-encoding", "gzip, deflate"),
    ("accept-language", ""),
    ("accept-ranges", ""),
    ("accept", ""),
    ("access-control-allow-origin", ""),
    ("age", ""),
    ("allow", ""),
    ("authorization", ""),
    ("cache-control", ""),
    ("content-disposition", ""),
    ("content-encoding", ""),
    ("content-language", ""),
    ("content-length", ""),
    ("content-location", ""),
    ("content-range", ""),
    ("content-type", ""),
    ("cookie", ""),
    ("date", ""),
    ("etag", ""),
    ("expect", ""),
    ("expires", ""),
    ("from", ""),
    ("host", ""),
    ("if-match", ""),
    ("if-modified-since", ""),
    ("if-none-match", ""),
    ("if-range", ""),
    ("if-unmodified-since", ""),
    ("last-modified", ""),
    ("link", ""),
    ("location", ""),
    ("max-forwards", ""),
    ("proxy-authenticate", ""),
    ("proxy-authorization", ""),
    ("range", ""),
    ("referer", ""),
    ("refresh", ""),
    ("retry-after", ""),
    ("server", ""),
    ("set-cookie", ""),
    ("strict-transport-security", ""),
    ("transfer-encoding", ""),
    ("user-agent", ""),
    ("vary", ""),
    ("via", ""),
    ("www-authenticate", ""),
];

/// The dynamic table size both ends start with (SETTINGS_HEADER_TABLE_SIZE's default, which the
/// bench's client does not change).
pub const DEFAULT_TABLE_SIZE: usize = 4096;

/// A dynamic table entry: name and value.
type Entry = (Box<[u8]>, Box<[u8]>);

/// Decodes the header blocks of one connection, in the order they arrive.
pub struct Decoder {
    /// Newest entry first.
    table: VecDeque<Entry>,
    size: usize,
    max_size: usize,
    /// The most the peer may set `max_size` to (our SETTINGS_HEADER_TABLE_SIZE).
    limit: usize,
    name: Vec<u8>,
    value: Vec<u8>,
}

impl Default for Decoder {
    fn default() -> Self {
        Decoder { table: VecDeque::new(), size: 0, max_size: DEFAULT_TABLE_SIZE, limit: DEFAULT_TABLE_SIZE, name: vec![], value: vec![] }
    }
}

/// Where a field's name comes from.
enum Name {
    Indexed(usize),
    Literal,
}

impl Decoder {
    /// Decodes one complete header block, calling `field` with each name and value in order.
    pub fn decode(&mut self, mut block: &[u8], mut field: impl FnMut(&[u8], &[u8])) -> Result<(), HpackError> {
        let mut fields_seen = false;
        while let Some(&first) = block.first() {
            if first & 0x80 != 0 {
                let index = integer(&mut block, 7)?;
                let (name, value) = self.entry(index)?;
                field(name, value);
                fields_seen = true;
            } else if first & 0xc0 == 0x40 {
                let index = integer(&mut block, 6)?;
                self.literal(&mut block, if index == 0 { Name::Literal } else { Name::Indexed(index) })?;
                field(&self.name, &self.value);
                let (name, value) = (self.name.as_slice().into(), self.value.as_slice().into());
                self.insert(name, value);
                fields_seen = true;
            } else if first & 0xe0 == 0x20 {
                if fields_seen {
                    return Err(HpackError("table size update after a field"));
                }
                let size = integer(&mut block, 5)?;
                if size > self.limit {
                    return Err(HpackError("table size update above the limit"));
                }
                self.max_size = size;
                self.evict(0);
            } else {
                // literal without indexing (0000) or never indexed (0001)
                let index = integer(&mut block, 4)?;
                self.literal(&mut block, if index == 0 { Name::Literal } else { Name::Indexed(index) })?;
                field(&self.name, &self.value);
                fields_seen = true;
            }
        }
        Ok(())
    }

    /// The entry at `index` (1-based: the static table, then the dynamic table newest first).
    fn entry(&self, index: usize) -> Result<(&[u8], &[u8]), HpackError> {
        match index {
            0 => Err(HpackError("index 0")),
            1..=61 => {
                let (name, value) = STATIC_TABLE[index - 1];
                Ok((name.as_bytes(), value.as_bytes()))
            }
            _ => self.table.get(index - 62).map(|(n, v)| (&n[..], &v[..])).ok_or(HpackError("index beyond the dynamic table")),
        }
    }

    /// Reads a literal field's name (unless indexed) and value into `self.name` and `self.value`.
    fn literal(&mut self, block: &mut &[u8], name: Name) -> Result<(), HpackError> {
        match name {
            Name::Indexed(index) => {
                let name = self.entry(index)?.0.to_vec();
                self.name = name;
            }
            Name::Literal => string(block, &mut self.name)?,
        }
        string(block, &mut self.value)
    }

    fn insert(&mut self, name: Box<[u8]>, value: Box<[u8]>) {
        let size = entry_size(&name, &value);
        if size > self.max_size {
            // an entry larger than the table empties it (RFC 7541 4.4)
            self.table.clear();
            self.size = 0;
            return;
        }
        self.evict(size);
        self.size += size;
        self.table.push_front((name, value));
    }

    /// Evicts the oldest entries until `room` more bytes fit.
    fn evict(&mut self, room: usize) {
        while self.size + room > self.max_size {
            let Some((name, value)) = self.table.pop_back() else { break };
            self.size -= entry_size(&name, &value);
        }
    }
}

fn entry_size(name: &[u8], value: &[u8]) -> usize {
    name.len() + value.len() + 32
}

/// An integer with an `prefix_bits`-bit prefix (RFC 7541 5.1), consumed from `block`.
fn integer(block: &mut &[u8], prefix_bits: u32) -> Result<usize, HpackError> {
    let (&first, mut rest) = block.split_first().ok_or(HpackError("truncated integer"))?;
    let max = (1usize << prefix_bits) - 1;
    let mut value = first as usize & max;
    if value == max {
        let mut shift = 0;
        loop {
            let (&byte, tail) = rest.split_first().ok_or(HpackError("truncated integer"))?;
            rest = tail;
            if shift > 28 {
                return Err(HpackError("integer too large"));
            }
            value += ((byte & 0x7f) as usize) << shift;
            shift += 7;
            if byte & 0x80 == 0 {
                break;
            }
        }
    }
    *block = rest;
    Ok(value)
}

/// A string literal (RFC 7541 5.2), consumed from `block` into `out`.
fn string(block: &mut &[u8], out: &mut Vec<u8>) -> Result<(), HpackError> {
    let huffman = block.first().ok_or(HpackError("truncated string"))? & 0x80 != 0;
    let len = integer(block, 7)?;
    if block.len() < len {
        return Err(HpackError("truncated string"));
    }
    let (bytes, rest) = block.split_at(len);
    *block = rest;
    out.clear();
    if huffman {
        huffman_decode(bytes, out)
    } else {
        out.extend_from_slice(bytes);
        Ok(())
    }
}

/// The code length of every symbol of HPACK's Huffman code (RFC 7541 Appendix B), EOS (256)
/// last. The code is canonical, so the lengths define it.
const CODE_LENGTHS: [u8; 257] = [
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 28, 6, 10,
    10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10, 13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7,
    7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6, 15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5, 6, 7, 6, 5, 5, 6,
    7, 7, 7, 7, 7, 15, 11, 14, 13, 28, 20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23, 24, 24, 22, 23, 24, 23, 23, 23, 23,
    21, 22, 23, 22, 23, 23, 24, 22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, 21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22,
    22, 23, 22, 22, 23, 26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, 19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28,
    27, 27, 27, 20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23, 26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27,
    26, 30,
];
const MAX_CODE_LENGTH: usize = 30;
const EOS: u16 = 256;

/// The canonical code's decoding tables: how many codes each length has, and the symbols
/// ordered by (length, symbol).
struct Canonical {
    count: [u16; MAX_CODE_LENGTH + 1],
    symbols: [u16; 257],
}

static CANONICAL: std::sync::LazyLock<Canonical> = std::sync::LazyLock::new(|| {
    let mut count = [0u16; MAX_CODE_LENGTH + 1];
    for &len in &CODE_LENGTHS {
        count[len as usize] += 1;
    }
    let mut order: Vec<u16> = (0..257).collect();
    order.sort_by_key(|&s| (CODE_LENGTHS[s as usize], s));
    let mut symbols = [0u16; 257];
    symbols.copy_from_slice(&order);
    Canonical { count, symbols }
});

/// Decodes a Huffman-coded string (RFC 7541 5.2) onto `out`, one bit at a time: header strings
/// the server does not index are rare, so this is not on the hot path.
fn huffman_decode(bytes: &[u8], out: &mut Vec<u8>) -> Result<(), HpackError> {
    let table = &*CANONICAL;
    // the code read so far, the first code of its length, and the index of that code's symbol
    let (mut code, mut first, mut index, mut len) = (0i32, 0i32, 0i32, 0usize);
    let mut all_ones = true;
    for &byte in bytes {
        for bit in (0..8).rev().map(|i| (byte >> i) & 1) {
            code |= bit as i32;
            all_ones &= bit == 1;
            len += 1;
            let count = table.count[len] as i32;
            if code - first < count {
                let symbol = table.symbols[(index + code - first) as usize];
                if symbol == EOS {
                    return Err(HpackError("EOS in a Huffman string"));
                }
                out.push(symbol as u8);
                (code, first, index, len, all_ones) = (0, 0, 0, 0, true);
            } else {
                if len == MAX_CODE_LENGTH {
                    return Err(HpackError("invalid Huffman code"));
                }
                index += count;
                first = (first + count) << 1;
                code <<= 1;
            }
        }
    }
    // padding: the most significant bits of EOS (all ones), shorter than a byte
    if len > 7 || !all_ones {
        return Err(HpackError("invalid Huffman padding"));
    }
    Ok(())
}

/// A request header block of `fields`, encoded once: each field a literal without indexing
/// (with the static table's name where it has one) and no Huffman coding, so sending it needs no
/// encoder state. Pseudo-header fields must come first.
pub fn encode_literal_block(fields: &[(&str, &str)]) -> Vec<u8> {
    let mut out = vec![];
    for &(name, value) in fields {
        match STATIC_TABLE.iter().position(|&(n, v)| n == name && v == value) {
            Some(i) => put_integer(&mut out, 7, 0x80, i + 1),
            None => {
                match STATIC_TABLE.iter().position(|&(n, _)| n == name) {
                    Some(i) => put_integer(&mut out, 4, 0x00, i + 1),
                    None => {
                        out.push(0x00);
                        put_integer(&mut out, 7, 0x00, name.len());
                        out.extend_from_slice(name.as_bytes());
                    }
                }
                put_integer(&mut out, 7, 0x00, value.len());
                out.extend_from_slice(value.as_bytes());
            }
        }
    }
    out
}

fn put_integer(out: &mut Vec<u8>, prefix_bits: u32, flags: u8, mut value: usize) {
    let max = (1usize << prefix_bits) - 1;
    if value < max {
        out.push(flags | value as u8);
        return;
    }
    out.push(flags | max as u8);
    value -= max;
    while value >= 0x80 {
        out.push((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    fn decode_all(decoder: &mut Decoder, block: &[u8]) -> Vec<(String, String)> {
        let mut fields = vec![];
        decoder
            .decode(block, |n, v| fields.push((String::from_utf8(n.to_vec()).unwrap(), String::from_utf8(v.to_vec()).unwrap())))
            .unwrap();
        fields
    }

    fn pairs(fields: &[(&str, &str)]) -> Vec<(String, String)> {
        fields.iter().map(|&(n, v)| (n.to_string(), v.to_string())).collect()
    }

    /// RFC 7541 C.3 and C.4: three requests on one connection, without and with Huffman coding;
    /// the dynamic table carries over from one to the next.
    #[test]
    fn decodes_the_rfc_request_examples() {
        for blocks in [
            [
                "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
                "8286 84be 5808 6e6f 2d63 6163 6865",
                "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
            ],
            [
                "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
                "8286 84be 5886 a8eb 1064 9cbf",
                "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
            ],
        ] {
            let mut d = Decoder::default();
            assert_eq!(
                decode_all(&mut d, &hex(blocks[0])),
                pairs(&[(":method", "GET"), (":scheme", "http"), (":path", "/"), (":authority", "www.example.com")])
            );
            assert_eq!(d.size, 57);
            assert_eq!(
                decode_all(&mut d, &hex(blocks[1])),
                pairs(&[
                    (":method", "GET"),
                    (":scheme", "http"),
                    (":path", "/"),
                    (":authority", "www.example.com"),
                    ("cache-control", "no-cache")
                ])
            );
            assert_eq!(d.size, 110);
            assert_eq!(
                decode_all(&mut d, &hex(blocks[2])),
                pairs(&[
                    (":method", "GET"),
                    (":scheme", "https"),
                    (":path", "/index.html"),
                    (":authority", "www.example.com"),
                    ("custom-key", "custom-value")
                ])
            );
            assert_eq!(d.size, 164);
            assert_eq!(d.table.len(), 3);
        }
    }

    /// RFC 7541 C.6.1 (with a 256-byte table, so entries are evicted on the way).
    #[test]
    fn decodes_huffman_answers_and_evicts() {
        let mut d = Decoder { max_size: 256, limit: 256, ..Decoder::default() };
        let fields = decode_all(
            &mut d,
            &hex("4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3"),
        );
        assert_eq!(
            fields,
            pairs(&[
                (":status", "302"),
                ("cache-control", "private"),
                ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
                ("location", "https://www.example.com")
            ])
        );
        assert_eq!(d.size, 222);
        // C.6.2: ":status 307" evicts ":status 302"
        let fields = decode_all(&mut d, &hex("4883 640e ffc1 c0bf"));
        assert_eq!(fields[0], (":status".to_string(), "307".to_string()));
        assert_eq!(d.size, 222);
        assert_eq!(d.table.len(), 4);
    }

    #[test]
    fn malformed_blocks_are_errors() {
        let mut d = Decoder::default();
        assert!(d.decode(&[0x80], |_, _| {}).is_err(), "index 0");
        assert!(d.decode(&[0xbe], |_, _| {}).is_err(), "empty dynamic table");
        assert!(d.decode(&[0x04, 0x05, b'a'], |_, _| {}).is_err(), "truncated string");
        assert!(d.decode(&[0x3f, 0xe2, 0x1f], |_, _| {}).is_err(), "table size above the limit");
        assert!(d.decode(&[0x04, 0x81, 0x00], |_, _| {}).is_err(), "Huffman padding of zeros");
        assert!(d.decode(&[0x04, 0x84, 0xff, 0xff, 0xff, 0xff], |_, _| {}).is_err(), "EOS");
    }

    #[test]
    fn request_blocks_decode_back_without_touching_the_table() {
        let fields = [
            (":method", "POST"),
            (":scheme", "http"),
            (":path", "/gateway_protocol.Gateway/CompleteJob"),
            (":authority", "127.0.0.1:26500"),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
        ];
        let block = encode_literal_block(&fields);
        let mut d = Decoder::default();
        assert_eq!(decode_all(&mut d, &block), pairs(&fields));
        assert!(d.table.is_empty());
        let mut long = vec![];
        put_integer(&mut long, 5, 0, 1337);
        assert_eq!(long, [31, 154, 10], "RFC 7541 C.1.2");
        assert_eq!(integer(&mut &long[..], 5), Ok(1337));
    }
}
