//! The data plane's Prometheus metrics: connections and bytes per listener and member, and
//! member health, appended to the API's `/metrics`.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::{DataPlane, ListenerStats, MemberRt, RunningListener};

impl DataPlane {
    /// The data plane's metrics in the Prometheus text format.
    pub(crate) fn metrics(&self) -> String {
        let running = self.running();
        let mut out = String::new();
        let mut family = |name: &str, kind: &str, help: &str, rows: Vec<(String, u64)>| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
            for (labels, v) in rows {
                let _ = writeln!(out, "{name}{{{labels}}} {v}");
            }
        };
        let mut listeners: Vec<(&String, &RunningListener)> = running.listeners.iter().collect();
        listeners.sort_by(|a, b| a.0.cmp(b.0));
        let ll = |_: &str, l: &RunningListener| {
            format!(
                "loadbalancer=\"{}\",listener=\"{}\",vip=\"{}\"",
                l.lb_id, l.listener_id, l.bind
            )
        };
        let rows = |f: &dyn Fn(&ListenerStats) -> u64| {
            listeners
                .iter()
                .map(|(id, l)| (ll(id, l), f(&l.stats)))
                .collect::<Vec<_>>()
        };
        family(
            "localcloud_lb_listener_connections_total",
            "counter",
            "Client connections accepted by a load balancer listener.",
            rows(&|s| s.connections.load(Ordering::Relaxed)),
        );
        family(
            "localcloud_lb_listener_active_connections",
            "gauge",
            "Client connections open on a load balancer listener.",
            rows(&|s| s.active.load(Ordering::Relaxed)),
        );
        family(
            "localcloud_lb_listener_bytes_in_total",
            "counter",
            "Bytes received from clients by a load balancer listener.",
            rows(&|s| s.bytes_in.load(Ordering::Relaxed)),
        );
        family(
            "localcloud_lb_listener_bytes_out_total",
            "counter",
            "Bytes sent to clients by a load balancer listener.",
            rows(&|s| s.bytes_out.load(Ordering::Relaxed)),
        );
        family(
            "localcloud_lb_listener_no_member_total",
            "counter",
            "Client connections closed because no healthy member could take them.",
            rows(&|s| s.no_member.load(Ordering::Relaxed)),
        );
        family(
            "localcloud_lb_listener_refused_total",
            "counter",
            "TCP connections closed and UDP datagrams dropped because their source is outside the listener's allowed_cidrs.",
            rows(&|s| s.refused.load(Ordering::Relaxed)),
        );
        let mut members: Vec<&Arc<MemberRt>> = running.members.values().collect();
        members.sort_by(|a, b| a.id.cmp(&b.id));
        let ml = |m: &MemberRt| {
            format!(
                "pool=\"{}\",member=\"{}\",address=\"{}\"",
                m.pool_id, m.id, m.addr
            )
        };
        let mrows = |f: &dyn Fn(&MemberRt) -> u64| {
            members.iter().map(|m| (ml(m), f(m))).collect::<Vec<_>>()
        };
        family(
            "localcloud_lb_member_connections_total",
            "counter",
            "Connections proxied to a pool member.",
            mrows(&|m| m.connections.load(Ordering::Relaxed)),
        );
        family(
            "localcloud_lb_member_active_connections",
            "gauge",
            "Proxied connections open to a pool member.",
            mrows(&|m| m.active.load(Ordering::Relaxed)),
        );
        family(
            "localcloud_lb_member_bytes_in_total",
            "counter",
            "Bytes received from a pool member.",
            mrows(&|m| m.bytes_in.load(Ordering::Relaxed)),
        );
        family(
            "localcloud_lb_member_bytes_out_total",
            "counter",
            "Bytes sent to a pool member.",
            mrows(&|m| m.bytes_out.load(Ordering::Relaxed)),
        );
        family(
            "localcloud_lb_member_healthy",
            "gauge",
            "1 while a pool member is in rotation (healthy and admin up).",
            mrows(&|m| {
                u64::from(m.healthy.load(Ordering::Relaxed) && m.admin_up.load(Ordering::Relaxed))
            }),
        );
        out
    }
}
