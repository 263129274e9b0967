//! Remote stores (S3, GCS, Azure, HTTP) through the `object_store` crate.
//!
//! `object_store` is async; the rest of hottext is not. This file is the only place the two
//! meet: each call runs to completion on a current-thread runtime owned by the store.

use std::future::Future;
use std::sync::Once;
use std::time::{Duration, SystemTime};

use futures_util::TryStreamExt;
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::azure::MicrosoftAzureBuilder;
use object_store::gcp::GoogleCloudStorageBuilder;
use object_store::http::HttpBuilder;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};

use super::{Backend, RawObject, StoreError};

/// Query keys that would put a secret into the meta file, which is committed.
const SECRET_KEYS: &[&str] = &[
    "access_key_id",
    "secret_access_key",
    "session_token",
    "token",
    "service_account_key",
    "access_key",
    "client_secret",
    "sas_key",
    "bearer_token",
];

pub(super) struct Remote {
    url: String,
    store: Box<dyn ObjectStore>,
    /// The URL's prefix inside the bucket: keys are under it.
    root: Path,
    runtime: tokio::runtime::Runtime,
}

impl Remote {
    /// `rest` is what follows `scheme://`: the bucket (or host), an optional prefix, an optional
    /// `?key=value&...` of client configuration.
    pub(super) fn open(url: &str, scheme: &str, rest: &str) -> Result<Remote, StoreError> {
        let bad = |msg: String| StoreError::BadUrl {
            url: url.to_string(),
            msg,
        };
        let (location, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (bucket, prefix) = location.split_once('/').unwrap_or((location, ""));
        if bucket.is_empty() {
            return Err(bad("names no bucket or host".into()));
        }
        let mut options = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair
                .split_once('=')
                .ok_or_else(|| bad(format!("'{pair}' is not key=value")))?;
            let plain = key.to_ascii_lowercase();
            let plain = ["aws_", "google_", "azure_", "azure_storage_"]
                .iter()
                .fold(plain.as_str(), |k, p| k.strip_prefix(p).unwrap_or(k))
                .to_string();
            if SECRET_KEYS.contains(&plain.as_str()) {
                return Err(bad(format!(
                    "'{key}' is a credential: the URL is written into the meta file, so \
                     credentials come from the environment (e.g. AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)"
                )));
            }
            options.push((key.to_ascii_lowercase(), value.to_string()));
        }
        let root = format!("{scheme}://{bucket}");
        let store = build(scheme, &root, &options).map_err(|e| bad(e.to_string()))?;
        let root = Path::from_iter(prefix.split('/').filter(|s| !s.is_empty()));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|source| StoreError::Io {
                store: url.to_string(),
                what: "start the I/O runtime".into(),
                source,
            })?;
        Ok(Remote {
            url: url.to_string(),
            store,
            root,
            runtime,
        })
    }

    fn run<T>(
        &self,
        what: impl FnOnce() -> String,
        fut: impl Future<Output = object_store::Result<T>>,
    ) -> Result<T, StoreError> {
        self.runtime
            .block_on(fut)
            .map_err(|e| self.error(what(), e))
    }

    fn error(&self, what: String, source: object_store::Error) -> StoreError {
        StoreError::Remote {
            store: self.url.clone(),
            what,
            source: Box::new(source),
        }
    }

    fn path(&self, key: &str) -> Path {
        key.split('/')
            .fold(self.root.clone(), |path, segment| path.join(segment))
    }
}

/// The builder for `scheme`, from the environment, with the URL's options on top.
fn build(
    scheme: &str,
    root: &str,
    options: &[(String, String)],
) -> object_store::Result<Box<dyn ObjectStore>> {
    // TLS for the HTTPS backends; harmless when a provider is already installed.
    static TLS: Once = Once::new();
    TLS.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
    macro_rules! configured {
        ($builder:expr) => {{
            let mut builder = $builder.with_url(root);
            for (key, value) in options {
                builder = builder.with_config(key.parse()?, value);
            }
            Box::new(builder.build()?) as Box<dyn ObjectStore>
        }};
    }
    Ok(match scheme {
        // gc deletes few objects; single DELETEs work on every S3-compatible server, the bulk
        // POST ?delete does not (s3proxy refuses its checksum header).
        "s3" | "s3a" => configured!(AmazonS3Builder::from_env()
            .with_config(AmazonS3ConfigKey::DisableBulkDelete, "true")),
        "gs" => configured!(GoogleCloudStorageBuilder::from_env()),
        "az" | "azure" | "abfs" | "abfss" => configured!(MicrosoftAzureBuilder::from_env()),
        "http" | "https" => configured!(HttpBuilder::new()),
        other => {
            return Err(object_store::Error::Generic {
                store: "hottext",
                source: format!(
                    "unknown scheme '{other}' (expected a directory, file://, s3://, gs://, az:// or https://)"
                )
                .into(),
            })
        }
    })
}

impl Backend for Remote {
    fn read(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let path = self.path(key);
        let fetched = self.runtime.block_on(async {
            let result = self.store.get(&path).await?;
            result.bytes().await
        });
        match fetched {
            Ok(bytes) => Ok(Some(bytes.to_vec())),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.error(format!("read {path}"), e)),
        }
    }

    /// A single PUT: S3 and the others store an object whole or not at all.
    fn write(&self, key: &str, bytes: &[u8]) -> Result<(), StoreError> {
        let path = self.path(key);
        let payload = PutPayload::from(bytes.to_vec());
        self.run(|| format!("write {path}"), self.store.put(&path, payload))
            .map(|_| ())
    }

    fn size(&self, key: &str) -> Result<Option<u64>, StoreError> {
        let path = self.path(key);
        match self.runtime.block_on(self.store.head(&path)) {
            Ok(meta) => Ok(Some(meta.size)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.error(format!("look up {path}"), e)),
        }
    }

    fn list(&self, folder: &str) -> Result<Vec<RawObject>, StoreError> {
        let folder = self.path(folder);
        let metas: Vec<_> = self.run(
            || format!("list {folder}"),
            self.store.list(Some(&folder)).try_collect(),
        )?;
        Ok(metas
            .into_iter()
            .filter_map(|m| {
                let parts: Vec<String> = m
                    .location
                    .prefix_match(&folder)?
                    .map(|p| p.as_ref().to_string())
                    .collect();
                let name = parts.join("/");
                let secs = u64::try_from(m.last_modified.timestamp()).ok()?;
                Some(RawObject {
                    name,
                    size: m.size,
                    modified: Some(SystemTime::UNIX_EPOCH + Duration::from_secs(secs)),
                })
            })
            .collect())
    }

    fn delete(&self, key: &str) -> Result<(), StoreError> {
        let path = self.path(key);
        match self.runtime.block_on(self.store.delete(&path)) {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(self.error(format!("delete {path}"), e)),
        }
    }
}
