//! The S3 media store against moto's S3 (the same emulator as DynamoDB and SQS; see
//! `scripts/test`). Needs `AWS_ENDPOINT_URL`.

use aws_sdk_s3::Client;
use aws_sdk_s3::config::{BehaviorVersion, Credentials, Region};
use channels::media::{MediaError, MediaStore, StoredMedia, media_key};
use media_s3::S3MediaStore;
use transcript::MediaRef;

fn client() -> Client {
    let endpoint = std::env::var("AWS_ENDPOINT_URL").unwrap_or_else(|_| {
        panic!(
            "AWS_ENDPOINT_URL is not set: these tests need moto. Start it with \
             `python3 scripts/moto_server_serial.py -H 127.0.0.1 -p 5000 &` and run \
             `AWS_ENDPOINT_URL=http://127.0.0.1:5000 cargo test -p media-s3` (or `scripts/test`)"
        )
    });
    Client::from_conf(config_at(endpoint).build())
}

/// Test credentials, by path (moto serves buckets by path, not by virtual host).
fn config_at(endpoint: String) -> aws_sdk_s3::config::Builder {
    aws_sdk_s3::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .endpoint_url(endpoint)
        .credentials_provider(Credentials::new("test", "test", None, None, "bridle-tests"))
        .force_path_style(true)
}

/// A store on a fresh bucket of its own.
async fn fresh() -> (S3MediaStore, String) {
    let client = client();
    let bucket = format!("bridle-media-{}", uuid::Uuid::new_v4());
    client
        .create_bucket()
        .bucket(&bucket)
        .send()
        .await
        .unwrap_or_else(|e| panic!("creating bucket {bucket} on moto failed: {e:?}"));
    (S3MediaStore::new(client, bucket.clone()), bucket)
}

#[tokio::test]
async fn put_then_get_round_trips_by_the_s3_reference() {
    let (store, bucket) = fresh().await;
    let key = media_key("whatsapp", "16315551181", "wamid.HBgL", 0);
    let bytes: Vec<u8> = (0..50_000u32).map(|i| (i % 253) as u8).collect();
    let r = store.put(&key, "image/jpeg", bytes.clone()).await.unwrap();
    assert_eq!(
        r,
        MediaRef {
            key: format!("s3://{bucket}/{key}"),
            mime_type: "image/jpeg".into(),
            size_bytes: 50_000
        }
    );
    let expected = StoredMedia {
        mime_type: "image/jpeg".into(),
        bytes,
    };
    assert_eq!(store.get(&r.key).await.unwrap(), expected, "by reference");
    assert_eq!(store.get(&key).await.unwrap(), expected, "by plain key");
    // The object really is at the media key, with its type.
    let head = client()
        .head_object()
        .bucket(&bucket)
        .key(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(head.content_type(), Some("image/jpeg"));
}

#[tokio::test]
async fn a_second_put_overwrites() {
    let (store, _) = fresh().await;
    let key = media_key("telegram", "111", "111:4000", 1);
    store
        .put(&key, "image/jpeg", b"one".to_vec())
        .await
        .unwrap();
    store
        .put(&key, "application/pdf", b"two".to_vec())
        .await
        .unwrap();
    assert_eq!(
        store.get(&key).await.unwrap(),
        StoredMedia {
            mime_type: "application/pdf".into(),
            bytes: b"two".to_vec()
        }
    );
}

#[tokio::test]
async fn a_missing_key_is_not_found() {
    let (store, _) = fresh().await;
    let key = media_key("slack", "D1", "D1:1", 0);
    let e = store.get(&key).await.unwrap_err();
    assert!(matches!(e, MediaError::NotFound), "{e:?}");
    assert_eq!(store.stored(&key).await.unwrap(), None);
}

#[tokio::test]
async fn what_is_stored_is_found_by_its_head_as_put_returned_it() {
    let (store, _) = fresh().await;
    let key = media_key("whatsapp", "16315551181", "wamid.HBgL", 1);
    let put = store.put(&key, "audio/ogg", vec![7; 1234]).await.unwrap();
    assert_eq!(store.stored(&key).await.unwrap(), Some(put.clone()));
    assert_eq!(
        store.stored(&put.key).await.unwrap(),
        Some(put),
        "by reference too"
    );
}

/// An S3 stand-in that answers every request with `status` and no body.
fn answering(status: u16) -> String {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let mut got = Vec::new();
            let mut buf = [0u8; 4096];
            while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                match conn.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                }
            }
            let _ = write!(
                conn,
                "HTTP/1.1 {status} Whatever\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
            );
        }
    });
    format!("http://{addr}")
}

fn store_at(endpoint: String) -> S3MediaStore {
    let config = config_at(endpoint)
        .retry_config(aws_sdk_s3::config::retry::RetryConfig::disabled())
        .build();
    S3MediaStore::new(Client::from_conf(config), "bridle-media")
}

/// Without `s3:ListBucket` S3 answers a HEAD of a missing key with 403: not stored. Any other
/// failure is a storage error.
#[tokio::test]
async fn a_forbidden_head_reads_as_not_stored_and_a_server_error_as_an_error() {
    let key = media_key("telegram", "42", "42:7", 0);
    assert_eq!(store_at(answering(403)).stored(&key).await.unwrap(), None);
    let e = store_at(answering(500)).stored(&key).await.unwrap_err();
    assert!(matches!(e, MediaError::Storage(_)), "{e:?}");
}

#[tokio::test]
async fn keys_outside_the_media_prefix_or_bucket_are_refused() {
    let (store, _) = fresh().await;
    for bad in [
        "s3://another-bucket/media/slack/D1/m/0",
        "secrets/config.json",
        "media/slack/../../x/0",
    ] {
        assert!(
            matches!(store.get(bad).await, Err(MediaError::Storage(_))),
            "{bad}"
        );
        assert!(
            store.put(bad, "text/plain", vec![1]).await.is_err(),
            "{bad}"
        );
    }
}

#[tokio::test]
async fn a_missing_bucket_is_a_storage_error() {
    let store = S3MediaStore::new(client(), format!("no-such-{}", uuid::Uuid::new_v4()));
    let e = store
        .put(&media_key("slack", "D1", "m", 0), "image/png", vec![1])
        .await
        .unwrap_err();
    assert!(matches!(e, MediaError::Storage(_)), "{e:?}");
}
