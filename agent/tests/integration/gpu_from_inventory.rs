//! The way back from a wire inventory to an assessment ([`assessment_from_inventory`]), which
//! the simulator's fake agents resolve GPU intents with: for every host fixture × intent, the
//! plan resolved on the rebuilt assessment reports what the plan on the real one reports
//! (for a partitioned AMD GPU, whose extra render nodes the inventory leaves out: the same
//! decision).

use crate::fixture_hosts;

use fixture_hosts::{INTENTS, assess, fixture_names};

use odac_host::gpu::{Allocations, Plan, assessment_from_inventory, resolve};
use odac_protocol::GpuRequest;

/// What the agent reports of a plan: the wire view (no GPU ids, no group ids).
fn reported(plan: &Plan) -> String {
    match plan {
        Plan::Cpu { reason, detail } => format!("cpu {reason}: {detail}"),
        Plan::Refuse {
            reason,
            fix,
            detail,
        } => format!("refuse {reason}: {detail}; fix: {fix:?}"),
        Plan::Attach(a) => format!("attach {} {} {:?}", a.vendor, a.mechanism, a.devices),
    }
}

/// The decision without its devices.
fn kind(reported: &str) -> String {
    reported.split(" [").next().unwrap_or_default().to_owned()
}

#[test]
fn the_rebuilt_assessment_resolves_like_the_real_one() {
    let none = Allocations::new();
    let mut compared = 0;
    let mut differ = Vec::new();
    for host in fixture_names() {
        let real = assess(&host);
        let rebuilt = assessment_from_inventory(&real.inventory());
        let partitioned = real.scan.gpus.iter().any(|g| {
            g.amd
                .as_ref()
                .is_some_and(|a| !a.partition_render_nodes.is_empty())
        });
        for json in INTENTS {
            let g: GpuRequest = serde_json::from_str(json).unwrap();
            let (got, want) = (
                reported(&resolve(&g, &rebuilt, &none)),
                reported(&resolve(&g, &real, &none)),
            );
            // a partitioned AMD GPU's extra render nodes are not in the inventory: the
            // same decision, with fewer nodes
            let (got, want) = if partitioned {
                (kind(&got), kind(&want))
            } else {
                (got, want)
            };
            if got != want {
                differ.push(format!(
                    "{host} × {json}\n  rebuilt: {got}\n  real:    {want}"
                ));
            }
            compared += 1;
        }
    }
    assert!(compared > 20, "only {compared} cells");
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}

#[test]
fn the_rebuilt_inventory_is_the_reported_one() {
    for host in fixture_names() {
        let inv = assess(&host).inventory();
        let again = assessment_from_inventory(&inv).inventory();
        assert_eq!(again.gpus.len(), inv.gpus.len(), "{host}");
        assert_eq!(again.accelerators, inv.accelerators, "{host}");
        assert_eq!(again.engine, inv.engine, "{host}");
        for (a, b) in again.gpus.iter().zip(&inv.gpus) {
            assert_eq!(
                (
                    a.vendor,
                    &a.pci_address,
                    a.passable,
                    &a.uuid,
                    &a.render_node
                ),
                (
                    b.vendor,
                    &b.pci_address,
                    b.passable,
                    &b.uuid,
                    &b.render_node
                ),
                "{host}"
            );
        }
    }
}
