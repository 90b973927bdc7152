//! Reconnect pacing against an in-process TLS control plane, in paused time: every delay is
//! drawn from the full-jitter envelope `[0, min(60 s, 1 s * 2^(n-1))]` and the gaps the server
//! sees match; a session that stayed healthy for 60 s resets the schedule (a shorter one does
//! not); a refused token over a simulated 10 minutes costs only a handful of attempts.

use crate::uplink_support;

use std::time::Duration;

use odac_agent::uplink::{BackoffPolicy, Delay, LinkEvent};
use tokio::sync::broadcast;
use uplink_support::*;

async fn next_backoff(link: &mut broadcast::Receiver<LinkEvent>) -> Delay {
    loop {
        match link.recv().await.unwrap() {
            LinkEvent::BackingOff(d) => return d,
            _ => continue,
        }
    }
}

/// An uplink whose every upgrade is answered 503.
async fn rejected_with_503() -> Running {
    let behaviour = Behaviour {
        reject_status: Some(503),
        ..Behaviour::default()
    };
    run_uplink(behaviour, TOKEN).await
}

#[tokio::test(start_paused = true)]
async fn delays_stay_inside_the_full_jitter_envelope_and_respect_the_cap() {
    let policy = BackoffPolicy::default();
    let mut r = rejected_with_503().await;
    let mut delays = Vec::new();
    for n in 1..=14u32 {
        let d = next_backoff(&mut r.link).await;
        assert_eq!(d.attempt, n);
        assert_eq!(d.ceiling, policy.ceiling(n), "attempt {n}");
        assert!(d.delay <= d.ceiling, "attempt {n}: {d:?}");
        assert!(d.ceiling <= Duration::from_secs(60));
        delays.push(d.delay);
    }
    // the control plane saw the attempts spaced by exactly those delays
    wait_for(
        &r.server.log,
        Duration::from_secs(120),
        "15 attempts",
        |l| l.accepts.len() >= 15,
    )
    .await;
    let accepts = r.server.log.lock().unwrap().accepts.clone();
    for (i, d) in delays.iter().enumerate() {
        let gap = accepts[i + 1] - accepts[i];
        let diff = gap.abs_diff(*d);
        assert!(
            diff <= Duration::from_millis(5),
            "gap {i}: {gap:?} vs delay {d:?}"
        );
    }
    // the capped attempts really are spread, not pinned to the cap
    assert!(delays[7..].iter().any(|d| *d < Duration::from_secs(59)));
    r.shutdown.cancel();
    r.task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn the_schedule_resets_after_a_session_healthy_for_60_seconds() {
    let mut r = rejected_with_503().await;
    for n in 1..=6u32 {
        assert_eq!(next_backoff(&mut r.link).await.attempt, n);
    }
    // a short session does not reset the schedule
    r.server.set(|b| {
        b.reject_status = None;
        b.close_after = Some(Duration::from_secs(10));
    });
    let d = next_backoff(&mut r.link).await;
    assert_eq!((d.attempt, d.ceiling), (7, Duration::from_secs(60)));
    // a session that stays up for 61 s does
    r.server
        .set(|b| b.close_after = Some(Duration::from_secs(61)));
    let d = next_backoff(&mut r.link).await;
    assert_eq!((d.attempt, d.ceiling), (1, Duration::from_secs(1)), "{d:?}");
    assert!(d.delay <= Duration::from_secs(1));
    let welcomed = r.server.log.lock().unwrap().welcomed.len();
    assert_eq!(welcomed, 2);
    r.shutdown.cancel();
    r.task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_refused_token_is_retried_slowly_over_ten_simulated_minutes() {
    let policy = BackoffPolicy::default();
    let mut r = run_uplink(Behaviour::default(), "wrong-token").await;
    let start = tokio::time::Instant::now();
    tokio::time::sleep(Duration::from_secs(600)).await;
    let attempts = r.server.log.lock().unwrap().auth_bad;
    println!("wrong token: {attempts} connection attempts in 10 simulated minutes");
    // the first attempt at once, then one every [auth_retry/2, auth_retry] = [150 s, 300 s]
    let most = 1 + (600 / (policy.auth_retry / 2).as_secs()) as usize;
    let least = 1 + (600 / policy.auth_retry.as_secs()) as usize;
    assert!(attempts <= most, "{attempts} > {most}");
    assert!(attempts >= least, "{attempts} < {least}");
    assert_eq!(r.server.log.lock().unwrap().auth_ok, 0);
    let mut unauthorized = 0;
    while let Ok(ev) = r.link.try_recv() {
        match ev {
            LinkEvent::ConnectFailed {
                unauthorized: u,
                error,
            } => {
                assert!(u, "{error}");
                assert!(error.contains("http 401"), "{error}");
                unauthorized += 1;
            }
            LinkEvent::BackingOff(d) => {
                assert!(d.delay >= policy.auth_retry / 2, "{d:?}");
            }
            _ => {}
        }
    }
    assert_eq!(unauthorized, attempts);
    assert!(start.elapsed() >= Duration::from_secs(600));
    r.shutdown.cancel();
    r.task.await.unwrap();
}
