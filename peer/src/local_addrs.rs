//! This machine's addresses: which one a link names when the embedded relay
//! listens on every interface (`--bind 0.0.0.0:PORT`), which others to list,
//! and which the native WebRTC transport binds.
//!
//! The address a link names is the one of the interface that holds the
//! default route: the one other machines on the LAN most likely reach. It is
//! found the way the kernel would route a packet to a public address (a UDP
//! socket `connect`ed to a documentation address sends nothing; the kernel only
//! picks its source), so it works without parsing routing tables and without a
//! packet leaving the machine.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};

use nix::ifaddrs::getifaddrs;
use nix::net::if_::InterfaceFlags;

/// Addresses no packet is sent to: TEST-NET-3 and the IPv6 documentation prefix.
const ROUTE_PROBE_V4: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 1);
const ROUTE_PROBE_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);

/// The source address the kernel would use toward the internet (the interface
/// holding the default route), in the family asked for; `None` without such a route.
pub fn default_route_addr(v6: bool) -> Option<IpAddr> {
    let (bind, probe): (SocketAddr, SocketAddr) = if v6 {
        (
            (Ipv6Addr::UNSPECIFIED, 0).into(),
            (ROUTE_PROBE_V6, 9).into(),
        )
    } else {
        (
            (Ipv4Addr::UNSPECIFIED, 0).into(),
            (ROUTE_PROBE_V4, 9).into(),
        )
    };
    let socket = UdpSocket::bind(bind).ok()?;
    socket.connect(probe).ok()?;
    let ip = socket.local_addr().ok()?.ip();
    usable(ip).then_some(ip)
}

/// Every address of an up, non-loopback interface that another machine could
/// reach: IPv4 but link-local, IPv6 global and unique-local (link-local ones
/// need a scope id and add nothing on one LAN). In interface order.
pub fn interface_addrs() -> Vec<IpAddr> {
    let mut out = Vec::new();
    match getifaddrs() {
        Ok(interfaces) => {
            for interface in interfaces {
                let flags = interface.flags;
                if !flags.contains(InterfaceFlags::IFF_UP)
                    || flags.contains(InterfaceFlags::IFF_LOOPBACK)
                {
                    continue;
                }
                let Some(address) = interface.address.as_ref() else {
                    continue;
                };
                let ip = match (address.as_sockaddr_in(), address.as_sockaddr_in6()) {
                    (Some(v4), _) => IpAddr::V4(v4.ip()),
                    (_, Some(v6)) => IpAddr::V6(v6.ip()),
                    _ => continue,
                };
                if usable(ip) && !out.contains(&ip) {
                    out.push(ip);
                }
            }
        }
        Err(error) => tracing::warn!(%error, "cannot list network interfaces"),
    }
    out
}

/// Whether another machine could reach this address (see [`interface_addrs`]).
pub fn usable(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            !(v4.is_loopback() || v4.is_unspecified() || v4.is_link_local() || v4.is_multicast())
        }
        IpAddr::V6(v6) => {
            let link_local = (v6.segments()[0] & 0xffc0) == 0xfe80;
            !(v6.is_loopback() || v6.is_unspecified() || v6.is_multicast() || link_local)
                && v6.to_ipv4_mapped().is_none()
        }
    }
}

/// For a relay listening on `bind`: the address links should name, and the
/// other addresses it is reachable at. A specific address is itself; a
/// wildcard is the default route's address in its family (else the first
/// interface address, else loopback), the rest of the interfaces listed.
pub fn link_addrs(bind: SocketAddr) -> (IpAddr, Vec<IpAddr>) {
    let ip = bind.ip();
    if !ip.is_unspecified() {
        return (ip, Vec::new());
    }
    let v6 = ip.is_ipv6();
    let all: Vec<IpAddr> = interface_addrs()
        .into_iter()
        // An IPv6 wildcard also takes IPv4 (dual stack); an IPv4 one only IPv4.
        .filter(|a| v6 || a.is_ipv4())
        .collect();
    let main = default_route_addr(v6)
        .or_else(|| v6.then(|| default_route_addr(false)).flatten())
        .or_else(|| all.first().copied())
        .unwrap_or(if v6 {
            IpAddr::V6(Ipv6Addr::LOCALHOST)
        } else {
            IpAddr::V4(Ipv4Addr::LOCALHOST)
        });
    let others = all.into_iter().filter(|a| *a != main).collect();
    (main, others)
}

/// `http://ip:port`, with brackets around an IPv6 address.
pub fn http_origin(ip: IpAddr, port: u16) -> String {
    format!("http://{}", SocketAddr::new(ip, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_specific_bind_address_is_the_link_address() {
        let (main, others) = link_addrs("192.168.1.20:8080".parse().expect("addr"));
        assert_eq!(main, "192.168.1.20".parse::<IpAddr>().expect("ip"));
        assert!(others.is_empty());
    }

    #[test]
    fn a_wildcard_never_names_the_wildcard_and_lists_each_address_once() {
        for bind in ["0.0.0.0:8080", "[::]:8080"] {
            let (main, others) = link_addrs(bind.parse().expect("addr"));
            assert!(!main.is_unspecified(), "{bind}: {main}");
            assert!(!others.contains(&main));
            let mut dedup = others.clone();
            dedup.dedup();
            assert_eq!(dedup, others);
            if bind.starts_with('0') {
                assert!(main.is_ipv4() && others.iter().all(IpAddr::is_ipv4));
            }
        }
    }

    #[test]
    fn addresses_other_machines_cannot_reach_are_not_usable() {
        for ip in [
            "127.0.0.1",
            "0.0.0.0",
            "169.254.3.4",
            "::1",
            "fe80::1",
            "::ffff:10.0.0.1",
        ] {
            assert!(!usable(ip.parse().expect("ip")), "{ip}");
        }
        for ip in ["10.77.0.1", "192.168.1.2", "2001:db8::5", "fd00::1"] {
            assert!(usable(ip.parse().expect("ip")), "{ip}");
        }
    }

    #[test]
    fn ipv6_origins_are_bracketed() {
        assert_eq!(
            http_origin("2001:db8::5".parse().expect("ip"), 8080),
            "http://[2001:db8::5]:8080"
        );
    }
}
