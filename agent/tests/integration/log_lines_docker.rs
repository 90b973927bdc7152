//! Live-log lines from the real Docker engine (PROTOCOL.md 3.6): a line longer than 4096 bytes
//! arrives as one line cut to at most 4096 bytes and ending with `…`, never split, also a
//! line over the engine's own 16 KiB message size (which the engine stores as several
//! partial messages); the line after it arrives whole, so every line the app wrote is one
//! line out. The container carries its own name and `odac.test` label and is removed at the
//! end, even when an assertion fails.

use crate::docker_support;

use std::time::{Duration, Instant};

use docker_support::{engine_with_test_image, then_clean_up, unique_suffix};
use futures_util::StreamExt;
use odac_host::engine::test_image::BUSYBOX_TEST_IMAGE;
use odac_host::engine::{ContainerEngine, ContainerSpec, LogStreamOptions};
use odac_protocol::{LOGS_CUT_MARK, MAX_LOGS_LINE};

/// Prints a 6000-byte line, a 20000-byte line, then `next` and `last`.
const SCRIPT: &str = "head -c 6000 /dev/zero | tr '\\0' a; echo; \
     head -c 20000 /dev/zero | tr '\\0' b; echo; echo next; echo last";

#[tokio::test]
async fn long_lines_are_cut_once_never_split() {
    let Some(engine) = engine_with_test_image("log_lines").await else {
        return;
    };
    let spec = ContainerSpec {
        name: format!("odac-loglines{}", unique_suffix()),
        image: BUSYBOX_TEST_IMAGE.into(),
        command: Some(vec!["sh".into(), "-c".into(), SCRIPT.into()]),
        labels: [("odac.test".to_owned(), "1".to_owned())].into(),
        ..ContainerSpec::default()
    };
    let id = engine.create(&spec).await.unwrap();
    then_clean_up(
        async {
            engine.start(&id).await.unwrap();
            let deadline = Instant::now() + Duration::from_secs(30);
            while engine.inspect(&id).await.unwrap().running {
                assert!(Instant::now() < deadline, "the container never exited");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            let options = LogStreamOptions {
                follow: false,
                ..LogStreamOptions::default()
            };
            let lines: Vec<String> = engine
                .log_stream(&id, options)
                .await
                .unwrap()
                .map(Result::unwrap)
                .collect()
                .await;
            assert_eq!(lines.len(), 4, "four lines written, four out: {lines:?}");
            for (line, fill) in [(&lines[0], 'a'), (&lines[1], 'b')] {
                assert!(line.len() <= MAX_LOGS_LINE, "{}", line.len());
                assert!(line.ends_with(LOGS_CUT_MARK), "marked as cut");
                let kept = line.trim_end_matches(LOGS_CUT_MARK);
                assert_eq!(kept.len(), MAX_LOGS_LINE - LOGS_CUT_MARK.len());
                assert!(kept.chars().all(|c| c == fill));
            }
            assert_eq!(&lines[2..], ["next", "last"]);
        },
        async {
            let _ = engine.remove(&id, true).await;
        },
    )
    .await;
}
