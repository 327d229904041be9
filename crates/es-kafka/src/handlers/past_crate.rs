//! Response bodies for versions newer than the kafka-protocol crate knows
//! (see [`crate::versions::PAST_CRATE`]), encoded by hand from the crate's
//! structs of the previous version.
//!
//! Only DescribeLogDirs v5 needs one: it is v4 with `IsCordoned` (bool,
//! KIP-1066) after `UsableBytes` in each log directory. es has no cordoned
//! directories, so it is always false. ListOffsets v11 has v10's shapes and
//! needs nothing here.

use kafka_protocol::messages::DescribeLogDirsResponse;
use kafka_protocol::protocol::buf::ByteBufMut;
use kafka_protocol::protocol::Encodable;

use crate::codec::varint::put_uvarint;

/// A DescribeLogDirs response body at v5 (flexible: compact arrays and
/// strings, empty tagged-field sections). The `version` the encoder is
/// called with is the crate's (4) and is ignored.
#[derive(Debug)]
pub struct DescribeLogDirsV5<'a>(pub &'a DescribeLogDirsResponse);

impl Encodable for DescribeLogDirsV5<'_> {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, _version: i16) -> anyhow::Result<()> {
        buf.put_slice(&self.body()?);
        Ok(())
    }

    fn compute_size(&self, _version: i16) -> anyhow::Result<usize> {
        Ok(self.body()?.len())
    }
}

impl DescribeLogDirsV5<'_> {
    /// The encoded body (small: one log directory, its topics' sizes).
    fn body(&self) -> anyhow::Result<Vec<u8>> {
        let r = self.0;
        let mut out = Vec::new();
        out.extend_from_slice(&r.throttle_time_ms.to_be_bytes());
        out.extend_from_slice(&r.error_code.to_be_bytes());
        compact_len(&mut out, r.results.len())?;
        for dir in &r.results {
            out.extend_from_slice(&dir.error_code.to_be_bytes());
            compact_str(&mut out, dir.log_dir.as_str())?;
            compact_len(&mut out, dir.topics.len())?;
            for t in &dir.topics {
                compact_str(&mut out, t.name.0.as_str())?;
                compact_len(&mut out, t.partitions.len())?;
                for p in &t.partitions {
                    out.extend_from_slice(&p.partition_index.to_be_bytes());
                    out.extend_from_slice(&p.partition_size.to_be_bytes());
                    out.extend_from_slice(&p.offset_lag.to_be_bytes());
                    out.push(u8::from(p.is_future_key));
                    out.push(0); // tagged fields
                }
                out.push(0);
            }
            out.extend_from_slice(&dir.total_bytes.to_be_bytes());
            out.extend_from_slice(&dir.usable_bytes.to_be_bytes());
            out.push(0); // IsCordoned: false
            out.push(0);
        }
        out.push(0);
        Ok(out)
    }
}

/// A compact array's or string's length: N + 1 as an unsigned varint.
fn compact_len(out: &mut Vec<u8>, len: usize) -> anyhow::Result<()> {
    let n = u32::try_from(len)
        .ok()
        .and_then(|n| n.checked_add(1))
        .ok_or_else(|| anyhow::anyhow!("{len} elements do not fit a compact length"))?;
    put_uvarint(out, n);
    Ok(())
}

fn compact_str(out: &mut Vec<u8>, s: &str) -> anyhow::Result<()> {
    compact_len(out, s.len())?;
    out.extend_from_slice(s.as_bytes());
    Ok(())
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use kafka_protocol::messages::describe_log_dirs_response::{
        DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
    };
    use kafka_protocol::messages::TopicName;
    use kafka_protocol::protocol::{Decodable, StrBytes};

    use super::*;

    fn sample() -> DescribeLogDirsResponse {
        let mut p = DescribeLogDirsPartition::default();
        p.partition_index = 3;
        p.partition_size = 1 << 33;
        p.offset_lag = 0;
        let mut t = DescribeLogDirsTopic::default();
        t.name = TopicName(StrBytes::from_static_str("orders"));
        t.partitions = vec![p.clone(), p];
        let mut dir = DescribeLogDirsResult::default();
        dir.log_dir = StrBytes::from_string("/data/é".repeat(30));
        dir.topics = vec![t];
        dir.total_bytes = 1 << 40;
        dir.usable_bytes = 1 << 39;
        let mut r = DescribeLogDirsResponse::default();
        r.throttle_time_ms = 7;
        r.results = vec![dir];
        r
    }

    /// v5 is v4 with one byte (IsCordoned = false) after UsableBytes in
    /// each result: the crate's v4 encoding with that byte inserted.
    #[test]
    fn v5_is_v4_with_is_cordoned_after_usable_bytes() {
        let r = sample();
        let mut v4 = Vec::new();
        r.encode(&mut v4, 4).expect("v4");
        let mut v5 = Vec::new();
        DescribeLogDirsV5(&r).encode(&mut v5, 4).expect("v5");
        assert_eq!(
            DescribeLogDirsV5(&r).compute_size(4).expect("size"),
            v5.len()
        );
        // One result: its tagged fields byte, then the response's, end v4.
        let cut = v4.len() - 2;
        let mut expected = v4[..cut].to_vec();
        expected.push(0);
        expected.extend_from_slice(&v4[cut..]);
        assert_eq!(v5, expected);
        // And the v4 decoder reads everything before the inserted byte.
        let back = DescribeLogDirsResponse::decode(&mut Bytes::from(v4), 4).expect("decode v4");
        assert_eq!(back, r);
    }

    #[test]
    fn empty_response() {
        let r = DescribeLogDirsResponse::default();
        let mut v5 = Vec::new();
        DescribeLogDirsV5(&r).encode(&mut v5, 4).expect("v5");
        // throttle, error code, empty compact array, tagged fields.
        assert_eq!(v5, [0, 0, 0, 0, 0, 0, 1, 0]);
    }
}
