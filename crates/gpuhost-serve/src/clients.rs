//! Connections open per client of one listener, for `--max-connections-per-client`: without it
//! one client could open all `--max-connections` and every other client would wait in the
//! kernel's backlog behind it. A client at its cap has its next connection closed at once: that
//! connection is its own excess, and waiting for a place would hold it, and the accept loop, for
//! everyone.
//!
//! A client is its peer's IPv4 address, or its IPv6 address's /64 prefix ([`client_of`]).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::{Arc, Mutex, PoisonError};

/// The client that `peer` is, as its connections are counted: an IPv6 address is its /64
/// prefix, the rest zeroed, since a host is normally given a whole /64 (SLAAC assigns within one
/// and privacy addresses rotate through it) and could open each connection from another of its
/// 2^64 addresses, each a client of its own. An IPv4-mapped address (`::ffff:a.b.c.d`, how a
/// dual-stack listener sees an IPv4 peer) is its IPv4 address: its /64 is all zeros, shared by
/// every IPv4 client.
pub(crate) fn client_of(peer: IpAddr) -> IpAddr {
    match peer {
        IpAddr::V4(_) => peer,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(Ipv6Addr::from_bits(v6.to_bits() & !(u128::MAX >> 64))),
        },
    }
}

/// The open connections of each client of a listener, at most `cap` each.
pub(crate) struct PerClient {
    cap: usize,
    /// By [`client_of`]. Only clients with a connection open are here, so it holds at most as
    /// many entries as the listener has connections.
    open: Mutex<HashMap<IpAddr, usize>>,
}

impl PerClient {
    pub(crate) fn new(cap: usize) -> Arc<Self> {
        Arc::new(Self {
            cap,
            open: Mutex::new(HashMap::new()),
        })
    }

    /// A place for one more connection from `peer`'s client ([`client_of`]), held until
    /// dropped; None at its cap.
    pub(crate) fn admit(self: &Arc<Self>, peer: IpAddr) -> Option<ClientHold> {
        let client = client_of(peer);
        // A panic elsewhere while holding the lock leaves counts that are still whole numbers.
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let count = open.entry(client).or_insert(0);
        if *count >= self.cap {
            return None;
        }
        *count += 1;
        Some(ClientHold {
            clients: self.clone(),
            client,
        })
    }
}

/// One connection's place among its client's ([`PerClient::admit`]).
pub(crate) struct ClientHold {
    clients: Arc<PerClient>,
    client: IpAddr,
}

impl Drop for ClientHold {
    fn drop(&mut self) {
        let mut open = self
            .clients
            .open
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = open.get_mut(&self.client) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                open.remove(&self.client);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_gets_its_cap_of_places_others_their_own_and_a_freed_place_is_taken_again() {
        let clients = PerClient::new(2);
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let mut held: Vec<_> = (0..2).map(|_| clients.admit(a).unwrap()).collect();
        assert!(clients.admit(a).is_none(), "a third place at a cap of 2");
        let other = clients.admit(b);
        assert!(other.is_some(), "another client was refused");
        held.pop();
        assert!(
            clients.admit(a).is_some(),
            "a freed place was not given again"
        );
        drop((held, other));
        assert!(
            clients.open.lock().unwrap().is_empty(),
            "clients kept with nothing open"
        );
    }

    #[test]
    fn an_ipv6_client_is_its_64_prefix_and_an_ipv4_mapped_address_its_ipv4_address() {
        let clients = PerClient::new(1);
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let first = clients.admit(ip("2001:db8:0:7::1"));
        assert!(first.is_some());
        assert!(
            clients.admit(ip("2001:db8:0:7:ffff::2")).is_none(),
            "another address of the same /64 was a client of its own"
        );
        let next_64 = clients.admit(ip("2001:db8:0:8::1"));
        assert!(
            next_64.is_some(),
            "the next /64 was taken for the same client"
        );
        // A dual-stack listener sees IPv4 clients as ::ffff:a.b.c.d, whose /64 is all zeros:
        // each is its IPv4 address, as it is on an IPv4 listener.
        let mapped = clients.admit(ip("::ffff:10.0.0.1"));
        assert!(mapped.is_some());
        assert!(
            clients.admit(ip("::ffff:10.0.0.2")).is_some(),
            "two IPv4 clients of a dual-stack listener were taken for one"
        );
        assert!(
            clients.admit(ip("10.0.0.1")).is_none(),
            "an IPv4 address and its mapped form were two clients"
        );
        // ::1 and ::2 share the all-zero /64 with no IPv4 address.
        let loopback = clients.admit(ip("::1"));
        assert!(loopback.is_some());
        assert!(clients.admit(ip("::2")).is_none());
    }
}
