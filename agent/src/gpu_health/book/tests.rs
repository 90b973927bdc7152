//! The recovery rule on a paused clock.

#![allow(clippy::unwrap_used)]

use super::*;
use odac_host::gpu_health::classify;

fn xid79() -> GpuKernelEvent {
    classify("NVRM: Xid (PCI:0000:0f:00): 79, GPU has fallen off the bus.").unwrap()
}

const GPU: &str = "0000:0f:00.0";

#[tokio::test(start_paused = true)]
async fn unhealthy_until_it_answered_for_the_whole_recovery_period() {
    let mut book = HealthBook::new(Duration::from_secs(300));
    let t0 = Instant::now();
    let change = book.critical(GPU, &xid79(), t0, 1_000).unwrap();
    let Change::Unhealthy { gpu, error } = change else {
        panic!("not unhealthy: {change:?}");
    };
    assert_eq!(gpu, GPU);
    assert_eq!((error.xid, error.count), (Some(79), 1));
    assert!(book.is_unhealthy(GPU));
    assert_eq!(
        book.unhealthy().get(GPU).map(String::as_str),
        Some("xid 79: GPU has fallen off the bus")
    );

    // gone from the bus for a while: no recovery, however long
    tokio::time::advance(Duration::from_secs(600)).await;
    assert!(book.observe(|_| false, Instant::now(), 2_000).is_empty());
    // back, but not yet for the whole period
    assert!(book.observe(|_| true, Instant::now(), 3_000).is_empty());
    tokio::time::advance(Duration::from_secs(299)).await;
    assert!(book.observe(|_| true, Instant::now(), 4_000).is_empty());
    assert!(book.is_unhealthy(GPU));
    tokio::time::advance(Duration::from_secs(1)).await;
    let changes = book.observe(|_| true, Instant::now(), 5_000);
    assert_eq!(
        changes,
        vec![Change::Recovered {
            gpu: GPU.into(),
            why: Recovery::Answered(Duration::from_secs(300))
        }]
    );
    assert!(!book.is_unhealthy(GPU));
    let wire = book.wire();
    let health = wire.get(GPU).unwrap();
    assert!(health.is_healthy());
    assert_eq!(health.since_ms, Some(5_000));
    assert_eq!(health.last_error.as_ref().unwrap().xid, Some(79));
}

#[tokio::test(start_paused = true)]
async fn a_new_error_restarts_the_period_and_counts() {
    let mut book = HealthBook::new(Duration::from_secs(60));
    assert!(book.critical(GPU, &xid79(), Instant::now(), 1).is_some());
    book.observe(|_| true, Instant::now(), 2);
    tokio::time::advance(Duration::from_secs(50)).await;
    // a second error while unhealthy is no new change, but it counts and restarts the clock
    assert_eq!(book.critical(GPU, &xid79(), Instant::now(), 3), None);
    tokio::time::advance(Duration::from_secs(50)).await;
    assert!(book.observe(|_| true, Instant::now(), 4).is_empty());
    tokio::time::advance(Duration::from_secs(10)).await;
    assert_eq!(book.observe(|_| true, Instant::now(), 5).len(), 1);
    assert_eq!(book.wire()[GPU].last_error.as_ref().unwrap().count, 2);
}

#[tokio::test(start_paused = true)]
async fn a_driver_reset_recovers_at_once_and_only_an_unhealthy_gpu() {
    let mut book = HealthBook::new(Duration::from_secs(300));
    assert_eq!(book.reset(GPU, 1), None);
    book.critical(GPU, &xid79(), Instant::now(), 1);
    assert_eq!(
        book.reset(GPU, 2),
        Some(Change::Recovered {
            gpu: GPU.into(),
            why: Recovery::DriverReset
        })
    );
    assert!(!book.any_unhealthy());
    assert_eq!(book.reset(GPU, 3), None);
}
