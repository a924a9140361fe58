//! Connections open per client (peer IP address) of one listener, for
//! `--max-connections-per-client`: without it one client could open all `--max-connections`
//! and every other client would wait in the kernel's backlog behind it. A client at its cap has
//! its next connection closed at once: that connection is its own excess, and waiting for a
//! place would hold it, and the accept loop, for everyone.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};

/// The open connections of each client of a listener, at most `cap` each.
pub(crate) struct PerClient {
    cap: usize,
    /// Only clients with a connection open are here, so it holds at most as many entries as
    /// the listener has connections.
    open: Mutex<HashMap<IpAddr, usize>>,
}

impl PerClient {
    pub(crate) fn new(cap: usize) -> Arc<Self> {
        Arc::new(Self {
            cap,
            open: Mutex::new(HashMap::new()),
        })
    }

    /// A place for one more connection of `client`, held until dropped; None at its cap.
    pub(crate) fn admit(self: &Arc<Self>, client: IpAddr) -> Option<ClientHold> {
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
}
