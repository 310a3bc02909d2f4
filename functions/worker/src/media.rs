//! Attachments on AWS: fetched with the channels' reply credentials (the same variables as the
//! senders, `BRIDLE_MEDIA_MAX_BYTES` for the cap) and kept in the S3 media bucket
//! (`BRIDLE_MEDIA_BUCKET`). Without a bucket, attachments are not read: the model is told so
//! and the message is still answered.

use channel_jobs::attachments::Attachments;
use channels::media::MediaFetcher;
use media_s3::S3MediaStore;
use std::sync::Arc;
use std::time::Duration;

type Vars<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The worker's attachments, from configuration; every problem at once.
pub fn attachments(
    var: Vars<'_>,
    aws: &aws_config::SdkConfig,
) -> Result<Option<Attachments>, Vec<String>> {
    let fetcher = MediaFetcher::from_vars(var)?;
    let Some(bucket) = var("BRIDLE_MEDIA_BUCKET").filter(|b| !b.trim().is_empty()) else {
        tracing::warn!("BRIDLE_MEDIA_BUCKET is not set: attachments will not be read");
        return Ok(None);
    };
    // Every outside call has a deadline (DESIGN.md invariant 5); S3 uploads of a capped
    // attachment fit well inside these.
    let timeouts = aws_config::timeout::TimeoutConfig::builder()
        .connect_timeout(Duration::from_secs(2))
        .operation_attempt_timeout(Duration::from_secs(10))
        .operation_timeout(Duration::from_secs(25))
        .build();
    let s3 = aws_sdk_s3::config::Builder::from(aws)
        .timeout_config(timeouts)
        .build();
    Ok(Some(Attachments {
        fetcher,
        store: Arc::new(S3MediaStore::new(aws_sdk_s3::Client::from_conf(s3), bucket)),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn run(pairs: &[(&str, &str)]) -> Result<Option<Attachments>, Vec<String>> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let aws = aws_config::SdkConfig::builder()
            .behavior_version(aws_config::BehaviorVersion::latest())
            .build();
        attachments(&|k| map.get(k).cloned(), &aws)
    }

    #[test]
    fn without_a_bucket_attachments_are_not_read() {
        assert!(run(&[]).unwrap().is_none());
        assert!(run(&[("BRIDLE_MEDIA_BUCKET", " ")]).unwrap().is_none());
    }

    #[test]
    fn a_bucket_makes_an_s3_store_and_the_cap_is_read() {
        let a = run(&[
            ("BRIDLE_MEDIA_BUCKET", "bridle-media-123"),
            ("BRIDLE_MEDIA_MAX_BYTES", "2048"),
        ])
        .unwrap()
        .expect("attachments on");
        assert!(format!("{:?}", a.store).contains("bridle-media-123"));
        assert_eq!(a.fetcher.limits().max_bytes, 2048);
    }

    #[test]
    fn a_bad_cap_stops_the_start() {
        let problems = run(&[
            ("BRIDLE_MEDIA_BUCKET", "b"),
            ("BRIDLE_MEDIA_MAX_BYTES", "ten"),
        ])
        .err()
        .unwrap();
        assert!(
            problems[0].contains("BRIDLE_MEDIA_MAX_BYTES"),
            "{problems:?}"
        );
    }
}
