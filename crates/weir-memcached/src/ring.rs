//! Which server of the list holds a key: a consistent-hash ring, ketama-style. The step
//! between a key's names (`keys.rs`) and the connection pool a call goes to (`context.rs`).
//! Pure: maps (server list, key body) to a server; it neither connects nor notices a
//! server that is down.
//!
//! Each server is put on a ring of 2³² positions at [`POINTS_PER_SERVER`] points, the
//! first four bytes of SHA-256(`"{host:port}-{i}"`); a key goes to the first point at or
//! after the first four bytes of SHA-256 of its names' body (the part every name of one key
//! shares, so its record, guard and buckets all live on one server and a decision on it is
//! one server's, atomic as with one memcached). So:
//!
//! - the order of the list does not matter, only the names in it (without regard to ASCII
//!   case, as host names): every instance must list the servers by the same `host:port`
//!   names (one `10.0.0.1:11211` and another `cache-a:11211` place keys differently);
//! - adding a server moves only the keys that land on its points (about `1/(N+1)` of
//!   them, all to it), and removing one moves only its own keys; a modulo mapping such as
//!   gomemcache's `crc32(key) % N` (envoyproxy/ratelimit's `MEMCACHE_HOST_PORT`) moves about
//!   `(N-1)/N` of them. A moved key starts afresh on its new server (see the crate docs);
//! - nothing here ever moves a key because its server is down: that is the caller's error.
//!
//! SHA-256 is stable, so every instance and every version place a key alike.

use sha2::{Digest, Sha256};

/// How many points each server has on the ring (ketama's 160: the largest server's share
/// stays within a few percent of `1/N` for small lists).
pub(crate) const POINTS_PER_SERVER: u32 = 160;

/// The ring of a server list.
#[derive(Debug, Clone)]
pub(crate) struct Ring {
    /// (position, index of the server in the list), sorted by position, ties by name.
    points: Vec<(u32, usize)>,
    servers: usize,
}

/// The first four bytes of SHA-256(`bytes`), big-endian.
fn position(bytes: &[u8]) -> u32 {
    let digest = Sha256::digest(bytes);
    let mut first = [0u8; 4];
    for (to, from) in first.iter_mut().zip(digest.iter()) {
        *to = *from;
    }
    u32::from_be_bytes(first)
}

impl Ring {
    /// The ring of `servers` (`host:port` names, distinct).
    pub(crate) fn new(servers: &[String]) -> Self {
        let names: Vec<String> = servers.iter().map(|s| s.to_ascii_lowercase()).collect();
        let mut points: Vec<(u32, &str, usize)> = Vec::new();
        if names.len() > 1 {
            for (index, name) in names.iter().enumerate() {
                for i in 0..POINTS_PER_SERVER {
                    let label = format!("{name}-{i}");
                    points.push((position(label.as_bytes()), name, index));
                }
            }
        }
        // Ties (two servers at one position) go to the smaller name, whatever the order of
        // the list.
        points.sort_unstable();
        Self {
            points: points
                .into_iter()
                .map(|(at, _, index)| (at, index))
                .collect(),
            servers: servers.len(),
        }
    }

    /// The index in the list of the server that holds the key whose names have `body`.
    pub(crate) fn server(&self, body: &str) -> usize {
        if self.servers <= 1 {
            return 0;
        }
        let at = position(body.as_bytes());
        let next = self.points.partition_point(|(point, _)| *point < at);
        self.points
            .get(next)
            .or_else(|| self.points.first())
            .map_or(0, |(_, index)| *index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| (*s).to_owned()).collect()
    }

    fn bodies() -> impl Iterator<Item = String> {
        (0..3000).map(|i| format!("=user:{i}"))
    }

    #[test]
    fn one_server_holds_every_key() {
        let ring = Ring::new(&list(&["a:1"]));
        assert!(bodies().all(|b| ring.server(&b) == 0));
    }

    #[test]
    fn keys_spread_over_every_server() {
        let servers = list(&["10.0.0.1:11211", "10.0.0.2:11211", "10.0.0.3:11211"]);
        let ring = Ring::new(&servers);
        let mut counts = [0usize; 3];
        for body in bodies() {
            counts[ring.server(&body)] += 1;
        }
        // 3000 keys: each server's share within 25% to 42% (an even split is 33%).
        for count in counts {
            assert!((750..=1260).contains(&count), "{counts:?}");
        }
    }

    #[test]
    fn the_order_of_the_list_and_the_case_of_names_do_not_matter() {
        let a = list(&["h1:1", "h2:1", "h3:1"]);
        let b = list(&["H3:1", "h1:1", "h2:1"]);
        let (ra, rb) = (Ring::new(&a), Ring::new(&b));
        for body in bodies() {
            assert_eq!(
                a[ra.server(&body)],
                b[rb.server(&body)].to_ascii_lowercase(),
                "{body}"
            );
        }
    }

    #[test]
    fn adding_a_server_moves_keys_only_to_it() {
        let three = list(&["h1:1", "h2:1", "h3:1"]);
        let four = list(&["h1:1", "h2:1", "h3:1", "h4:1"]);
        let (r3, r4) = (Ring::new(&three), Ring::new(&four));
        let mut moved = 0;
        for body in bodies() {
            let (before, after) = (&three[r3.server(&body)], &four[r4.server(&body)]);
            if before != after {
                assert_eq!(after, "h4:1", "{body} moved between old servers");
                moved += 1;
            }
        }
        // About a quarter, never most of them (a modulo mapping moves three quarters).
        assert!((450..=1050).contains(&moved), "{moved} of 3000 moved");
    }

    #[test]
    fn removing_a_server_moves_only_its_keys() {
        let three = list(&["h1:1", "h2:1", "h3:1"]);
        let two = list(&["h1:1", "h3:1"]);
        let (r3, r2) = (Ring::new(&three), Ring::new(&two));
        for body in bodies() {
            let before = &three[r3.server(&body)];
            if before != "h2:1" {
                assert_eq!(before, &two[r2.server(&body)], "{body}");
            }
        }
    }
}
