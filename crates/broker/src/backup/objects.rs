//! Where a backup's files go: a directory or an S3-compatible bucket, both through the
//! `object_store` crate (its local file system store and its S3 client), so that the backup
//! code has one path. Calls block their thread on a runtime of the backup store's own: call
//! them from plain threads or `spawn_blocking`, never from async code.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use futures_util::StreamExt;
use object_store::path::Path as Key;
use object_store::{ObjectStore, PutPayload, WriteMultipart};

/// Files above this size go up in parts of this size (S3's parts are 5 MiB at least).
const PART: usize = 16 << 20;

/// The settings of an S3-compatible store, after Zeebe's S3 backup store
/// (`zeebe.broker.data.backup.s3.*`: bucketName, endpoint, region, accessKey, secretKey,
/// basePath). Unset credentials and region come from the usual `AWS_*` environment variables.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct S3Config {
    pub bucket: String,
    /// The S3 API's URL, e.g. `http://127.0.0.1:9000`; `None`: AWS's, by region.
    pub endpoint: Option<String>,
    pub region: Option<String>,
    pub access_key: Option<String>,
    pub secret_key: Option<String>,
    /// A folder in the bucket every key of the store goes under (several clusters can share a
    /// bucket).
    pub base_path: Option<String>,
}

/// Which store backups go to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreConfig {
    /// A directory (a shared file system's, in a cluster).
    Dir(PathBuf),
    /// An S3-compatible bucket.
    S3(S3Config),
}

impl std::fmt::Display for StoreConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreConfig::Dir(dir) => write!(f, "{}", dir.display()),
            StoreConfig::S3(s3) => write!(f, "s3://{}/{}", s3.bucket, s3.base_path.as_deref().unwrap_or("")),
        }
    }
}

/// The runtime every backup store's requests run on (one thread; never dropped, so that a
/// store can be dropped anywhere).
fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("backup-io")
            .enable_all()
            .build()
            .expect("the backup store's runtime")
    })
}

/// The objects of a backup store, by key (`/`-separated, relative to the store's root).
#[derive(Debug, Clone)]
pub(crate) struct Objects {
    store: Arc<dyn ObjectStore>,
    /// Prefixed to every key (S3's base path).
    base: String,
    /// The directory of a directory store (its empty folders are removed with a backup).
    dir: Option<PathBuf>,
}

impl Objects {
    pub(crate) fn open(config: &StoreConfig) -> Result<Self, String> {
        match config {
            StoreConfig::Dir(dir) => {
                std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
                let store = object_store::local::LocalFileSystem::new_with_prefix(dir).map_err(|e| e.to_string())?;
                Ok(Self { store: Arc::new(store), base: String::new(), dir: Some(dir.clone()) })
            }
            StoreConfig::S3(s3) => {
                let mut builder = object_store::aws::AmazonS3Builder::from_env().with_bucket_name(&s3.bucket);
                if let Some(endpoint) = &s3.endpoint {
                    builder = builder.with_endpoint(endpoint).with_allow_http(endpoint.starts_with("http://"));
                }
                if let Some(region) = &s3.region {
                    builder = builder.with_region(region);
                }
                if let Some(key) = &s3.access_key {
                    builder = builder.with_access_key_id(key);
                }
                if let Some(secret) = &s3.secret_key {
                    builder = builder.with_secret_access_key(secret);
                }
                let store = builder.build().map_err(|e| format!("the S3 backup store: {e}"))?;
                let base = s3.base_path.as_deref().unwrap_or("").trim_matches('/');
                let base = if base.is_empty() { String::new() } else { format!("{base}/") };
                Ok(Self { store: Arc::new(store), base, dir: None })
            }
        }
    }

    fn key(&self, key: &str) -> Key {
        Key::from(format!("{}{key}", self.base))
    }

    /// Writes `bytes` as `key` (whole: a reader sees the old object or the new one).
    pub(crate) fn put(&self, key: &str, bytes: Vec<u8>) -> Result<(), String> {
        let k = self.key(key);
        runtime().block_on(self.store.put(&k, PutPayload::from(bytes))).map(drop).map_err(|e| format!("writing {key}: {e}"))
    }

    /// Object `key`, or `None` if there is none.
    pub(crate) fn get(&self, key: &str) -> Result<Option<Vec<u8>>, String> {
        let k = self.key(key);
        runtime()
            .block_on(async {
                match self.store.get(&k).await {
                    Ok(got) => got.bytes().await.map(|b| Some(b.to_vec())),
                    Err(object_store::Error::NotFound { .. }) => Ok(None),
                    Err(e) => Err(e),
                }
            })
            .map_err(|e| format!("reading {key}: {e}"))
    }

    /// Whether object `key` exists.
    pub(crate) fn exists(&self, key: &str) -> Result<bool, String> {
        let k = self.key(key);
        match runtime().block_on(self.store.head(&k)) {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(format!("reading {key}: {e}")),
        }
    }

    /// Uploads the file `path` as `key`, in parts if it is large.
    pub(crate) fn upload(&self, path: &Path, key: &str) -> Result<(), String> {
        let context = |e: &dyn std::fmt::Display| format!("uploading {} to {key}: {e}", path.display());
        let mut file = std::fs::File::open(path).map_err(|e| context(&e))?;
        let size = file.metadata().map_err(|e| context(&e))?.len();
        if size <= PART as u64 {
            let mut bytes = Vec::with_capacity(size as usize);
            file.read_to_end(&mut bytes).map_err(|e| context(&e))?;
            return self.put(key, bytes);
        }
        let k = self.key(key);
        runtime()
            .block_on(async {
                let upload = self.store.put_multipart(&k).await?;
                let mut writer = WriteMultipart::new_with_chunk_size(upload, PART);
                let mut buf = vec![0u8; PART];
                loop {
                    let n = file.read(&mut buf).map_err(|e| object_store::Error::Generic { store: "backup", source: Box::new(e) })?;
                    if n == 0 {
                        break;
                    }
                    writer.wait_for_capacity(2).await?;
                    writer.write(&buf[..n]);
                }
                writer.finish().await
            })
            .map(drop)
            .map_err(|e| context(&e))
    }

    /// Downloads object `key` into the file `path` (created; synced).
    pub(crate) fn download(&self, key: &str, path: &Path) -> Result<(), String> {
        let context = |e: &dyn std::fmt::Display| format!("downloading {key} to {}: {e}", path.display());
        let k = self.key(key);
        let mut file = std::fs::File::create(path).map_err(|e| context(&e))?;
        runtime()
            .block_on(async {
                let mut chunks = self.store.get(&k).await.map_err(|e| e.to_string())?.into_stream();
                while let Some(chunk) = chunks.next().await {
                    file.write_all(&chunk.map_err(|e| e.to_string())?).map_err(|e| e.to_string())?;
                }
                Ok::<_, String>(())
            })
            .map_err(|e| context(&e))?;
        file.sync_all().map_err(|e| context(&e))
    }

    /// The names of the folders right under `prefix` (`""`: the store's root).
    pub(crate) fn folders(&self, prefix: &str) -> Result<Vec<String>, String> {
        let k = self.key(prefix);
        let listed = runtime().block_on(self.store.list_with_delimiter(Some(&k))).map_err(|e| format!("listing {prefix}: {e}"))?;
        Ok(listed.common_prefixes.iter().filter_map(|p| p.filename().map(str::to_string)).collect())
    }

    /// The keys of every object under `prefix`, relative to it.
    pub(crate) fn files(&self, prefix: &str) -> Result<Vec<String>, String> {
        let k = self.key(prefix);
        let strip = format!("{k}/");
        runtime()
            .block_on(async {
                let mut keys = Vec::new();
                let mut listing = self.store.list(Some(&k));
                while let Some(meta) = listing.next().await {
                    let key = meta?.location.to_string();
                    keys.push(key.strip_prefix(&strip).unwrap_or(&key).to_string());
                }
                Ok::<_, object_store::Error>(keys)
            })
            .map_err(|e| format!("listing {prefix}: {e}"))
    }

    /// Removes object `key` (none: nothing to do).
    pub(crate) fn delete(&self, key: &str) -> Result<(), String> {
        match runtime().block_on(self.store.delete(&self.key(key))) {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(format!("removing {key}: {e}")),
        }
    }

    /// Removes every object under `prefix` (and, in a directory store, its folder).
    pub(crate) fn remove_all(&self, prefix: &str) -> Result<(), String> {
        for file in self.files(prefix)? {
            self.delete(&format!("{prefix}/{file}"))?;
        }
        if let Some(dir) = &self.dir {
            match std::fs::remove_dir_all(dir.join(prefix)) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(format!("removing {}: {e}", dir.join(prefix).display())),
            }
        }
        Ok(())
    }
}
