use super::*;

fn local() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().to_str().unwrap()).unwrap();
    (dir, store)
}

/// `make test` runs this in the build without the `remote` feature.
#[cfg(not(feature = "remote"))]
#[test]
fn without_the_remote_feature_a_remote_url_says_how_to_get_one() {
    let err = Store::open("s3://bucket/profiles").err().unwrap();
    assert!(
        !err.is_unavailable(),
        "a build choice, not an outage: {err}"
    );
    assert!(err.to_string().contains("cargo feature `remote`"), "{err}");
    assert!(Store::open("file:///tmp/store").is_ok());
}

#[test]
fn put_twice_says_the_object_was_there_and_get_checks_the_content() {
    let (dir, store) = local();
    let first = store.put(b"profile").unwrap();
    assert!(!first.existed);
    assert!(store.put(b"profile").unwrap().existed);
    let path = dir.path().join(OBJECTS).join(first.hash.hex());
    std::fs::write(&path, b"tampered").unwrap();
    match store.get(&first.hash) {
        Err(StoreError::Corrupt { hash, actual, .. }) => {
            assert_eq!(hash, first.hash);
            assert_eq!(actual, ObjectHash::of(b"tampered"));
        }
        other => panic!("expected a corrupt object, got {other:?}"),
    }
    // A put repairs a corrupted object.
    assert!(!store.put(b"profile").unwrap().existed);
    assert_eq!(store.get(&first.hash).unwrap(), b"profile");
}

#[test]
fn putting_an_old_object_again_keeps_it_from_gc() {
    let (dir, store) = local();
    let put = store.put(b"profile").unwrap();
    let path = dir.path().join(OBJECTS).join(put.hash.hex());
    let day = Duration::from_secs(86400);
    let long_ago = SystemTime::now() - 30 * day;
    let file = std::fs::File::options().write(true).open(&path).unwrap();
    file.set_modified(long_ago).unwrap();
    drop(file);
    let none = HashSet::default();
    let report = store.gc(&none, day, SystemTime::now(), true).unwrap();
    assert_eq!(report.deleted.len(), 1, "the object is old before the put");
    assert!(store.put(b"profile").unwrap().existed);
    let report = store.gc(&none, day, SystemTime::now(), true).unwrap();
    assert_eq!((report.deleted.len(), report.kept_young), (0, 1));
}

#[test]
fn missing_object_names_its_hash() {
    let (_dir, store) = local();
    let hash = ObjectHash::of(b"never stored");
    let err = store.get(&hash).unwrap_err();
    assert!(matches!(err, StoreError::Missing { .. }));
    assert!(err.to_string().contains(&hash.to_string()), "{err}");
}

#[test]
fn gc_keeps_referenced_and_young_objects() {
    let (_dir, store) = local();
    let kept = store.put(b"kept").unwrap().hash;
    let dropped = store.put(b"dropped").unwrap().hash;
    let keep: HashSet<ObjectHash> = [kept].into();
    let now = SystemTime::now();
    let young = store
        .gc(&keep, Duration::from_secs(3600), now, false)
        .unwrap();
    assert_eq!((young.kept_young, young.deleted.len()), (1, 0));
    let later = now + Duration::from_secs(7200);
    let report = store
        .gc(&keep, Duration::from_secs(3600), later, false)
        .unwrap();
    assert_eq!(report.deleted.len(), 1);
    assert_eq!(report.deleted[0].hash, dropped);
    let left: Vec<ObjectHash> = store.list().unwrap().iter().map(|o| o.hash).collect();
    assert_eq!(left, [kept]);
}
