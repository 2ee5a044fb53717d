//! gRPC's message framing over HTTP/2: a compressed flag (one byte), the length (four bytes, big
//! endian) and the message. The gateway's transport and the bench's unary client both read and
//! write single messages this way.

use bytes::{BufMut, Bytes, BytesMut};
use prost::Message;

/// The bytes before a message: the compressed flag and the length.
pub const PREFIX_BYTES: usize = 5;

/// `message` framed, uncompressed.
pub fn frame<M: Message>(message: &M) -> Bytes {
    let len = message.encoded_len();
    let mut out = BytesMut::with_capacity(PREFIX_BYTES + len);
    out.put_u8(0);
    out.put_u32(len as u32);
    message.encode_raw(&mut out);
    out.freeze()
}

/// The one message `body` holds, if it holds exactly one whole frame: (compressed flag set,
/// message bytes). `None` for an empty, truncated or longer body.
pub fn single(body: &[u8]) -> Option<(bool, &[u8])> {
    let (&flag, rest) = body.split_first()?;
    let len = u32::from_be_bytes(rest.get(..4)?.try_into().ok()?) as usize;
    let message = rest.get(4..)?;
    (message.len() == len).then_some((flag != 0, message))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::CompleteJobRequest;

    #[test]
    fn one_frame_round_trips_and_anything_else_is_refused() {
        let request = CompleteJobRequest { job_key: 42, variables: "{\"a\":1}".into() };
        let framed = frame(&request);
        let (compressed, message) = single(&framed).expect("one frame");
        assert!(!compressed);
        assert_eq!(CompleteJobRequest::decode(message).unwrap(), request);

        assert!(single(&[]).is_none(), "empty");
        assert!(single(&framed[..framed.len() - 1]).is_none(), "truncated");
        assert!(single(&framed[..3]).is_none(), "a partial prefix");
        let mut two = framed.to_vec();
        two.extend_from_slice(&framed);
        assert!(single(&two).is_none(), "two frames");
        let mut flagged = framed.to_vec();
        flagged[0] = 1;
        assert_eq!(single(&flagged).map(|(c, _)| c), Some(true));
        let empty = frame(&crate::gateway::CompleteJobResponse {});
        assert_eq!(single(&empty), Some((false, &[][..])));
    }
}
