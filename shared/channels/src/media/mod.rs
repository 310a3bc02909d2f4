//! Inbound attachments: fetched from the platform in one or two hops with size caps before and
//! after ([`MediaFetcher`]), then kept in a blob store by reference ([`MediaStore`]) under a
//! stable, sanitised key ([`media_key`]). The transcript holds only the [`MediaRef`].
//!
//! Nothing here reads the environment except [`MediaFetcher::from_vars`], and nothing here
//! depends on AWS: the S3 adapter is the `media-s3` crate.
//!
//! [`MediaRef`]: transcript::MediaRef

mod config;
mod download;
mod error;
mod fetcher;
mod follow;
mod hosts;
mod key;
mod local_files;
mod memory;
pub mod platforms;
mod store;

pub use error::{MediaError, size};
pub use fetcher::{
    DEFAULT_MAX_BYTES, DEFAULT_TIMEOUT, FetchLimits, Fetched, MediaFetcher, PlatformMedia,
};
pub use key::{is_media_key, media_key};
pub use local_files::LocalFiles;
pub use memory::InMemory;
pub use store::{MediaStore, StoredMedia};
