//! Placeholders in fuzzer-chosen bytes: `%` and one letter, replaced by a
//! value the harness computes when it sends the message. A `%` followed by a
//! letter nobody claims stays as it is, so every byte string is a template.
//!
//! | placeholder | replaced by |
//! |---|---|
//! | `%I` `%S` | API key A's id and secret ([`crate::plain`]) |
//! | `%J` `%T` | API key B's id and secret |
//! | `%R` | the revoked key's id |
//! | `%W` | key A's secret with its last character changed |
//! | `%L` | 257 bytes, one more than es hashes for an id or secret |
//! | `%N` | the nonce of the last server-first message (client's + server's) |
//! | `%C` | base64 of the GS2 header of the last client-first message |
//! | `%P` | the right SCRAM proof for what precedes it ([`crate::scram`]) |
//! | `%X` | that proof with one bit flipped |

/// Replaces placeholders in `template`: `f(letter, output so far)` returns
/// the replacement, or `None` to keep `%letter` as it is.
pub fn substitute(template: &[u8], mut f: impl FnMut(u8, &[u8]) -> Option<Vec<u8>>) -> Vec<u8> {
    let mut out = Vec::with_capacity(template.len());
    let mut i = 0;
    while i < template.len() {
        if template[i] == b'%' && i + 1 < template.len() {
            if let Some(replacement) = f(template[i + 1], &out) {
                out.extend_from_slice(&replacement);
                i += 2;
                continue;
            }
        }
        out.push(template[i]);
        i += 1;
    }
    out
}
