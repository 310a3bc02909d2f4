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
    http: &reqwest::Client,
    aws: &aws_config::SdkConfig,
) -> Result<Option<Attachments>, Vec<String>> {
    let fetcher = MediaFetcher::from_vars(var, http)?;
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
