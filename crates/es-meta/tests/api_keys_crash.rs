//! `api_keys.json` is the one metadata file written outside es-storage's
//! `Fs` seam: es-auth's `ApiKeys::save` uses std::fs directly (a fixed
//! temporary name `api_keys.json.tmp`, created and truncated, written,
//! `sync_all`, renamed over the file, the directory fsynced), so the
//! simulated file system cannot crash it. Here, on a real temporary
//! directory, each state a crash between two of those steps can leave is
//! built on disk (the old file with no temporary file, an empty one, a
//! prefix of the new bytes, the whole new bytes, the rename done), and the
//! loader must find the old keys or the new ones, never an error or an
//! empty set; a save from each state must then succeed and leave no
//! temporary file. A real interruption at the first step (the temporary
//! name taken by a directory) leaves the old keys. (Lives here because
//! es-meta depends on es-auth and stores its keys in the metadata log.)

use es_auth::api_keys::ApiKeys;
use es_auth::principal::Principal;

fn ids(keys: &ApiKeys) -> Vec<String> {
    let mut v: Vec<String> = keys.list().map(|k| k.id.clone()).collect();
    v.sort();
    v
}

#[test]
fn every_state_an_interrupted_save_can_leave_loads_old_or_new_keys() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("api_keys.json");
    let tmp = dir.path().join("api_keys.json.tmp");
    let mut keys = ApiKeys::new();
    keys.create(Principal::user("alice"), None, 1)
        .expect("create");
    keys.save(&path).expect("save");
    let old = std::fs::read(&path).expect("old bytes");
    let old_ids = ids(&keys);
    keys.create(Principal::user("bob"), None, 2)
        .expect("create");
    let new_ids = ids(&keys);
    let elsewhere = dir.path().join("new.json");
    keys.save(&elsewhere).expect("save elsewhere");
    let new = std::fs::read(&elsewhere).expect("new bytes");
    std::fs::remove_file(&elsewhere).expect("rm");

    // (what api_keys.json holds, what api_keys.json.tmp holds)
    type State<'a> = (Option<&'a [u8]>, Option<&'a [u8]>);
    let states: Vec<State<'_>> = vec![
        (Some(&old), None),
        (Some(&old), Some(b"")),
        (Some(&old), Some(&new[..new.len() / 3])),
        (Some(&old), Some(&new[..new.len() - 1])),
        (Some(&old), Some(&new)),
        (Some(&new), None),
        (None, Some(&new[..7])),
    ];
    for (i, (file, stray)) in states.iter().enumerate() {
        let _ = std::fs::remove_file(&path);
        let _ = std::fs::remove_file(&tmp);
        if let Some(b) = file {
            std::fs::write(&path, b).expect("file");
        }
        if let Some(b) = stray {
            std::fs::write(&tmp, b).expect("tmp");
        }
        let loaded = ApiKeys::load(&path).unwrap_or_else(|e| {
            panic!("state {i}: an interrupted save made the file unreadable: {e}")
        });
        let got = ids(&loaded);
        match file {
            Some(_) => assert!(
                got == old_ids || got == new_ids,
                "state {i}: the old keys or the new ones, got {got:?}"
            ),
            None => assert!(got.is_empty(), "state {i}: no file yet, no keys"),
        }
        keys.save(&path)
            .unwrap_or_else(|e| panic!("state {i}: a save after the crash fails: {e}"));
        assert_eq!(
            ids(&ApiKeys::load(&path).expect("load")),
            new_ids,
            "state {i}"
        );
        assert!(
            !tmp.exists(),
            "state {i}: the temporary file is renamed away"
        );
    }
}

#[test]
fn a_save_that_fails_at_its_first_step_keeps_the_old_keys() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("api_keys.json");
    let mut keys = ApiKeys::new();
    keys.create(Principal::user("alice"), None, 1)
        .expect("create");
    keys.save(&path).expect("save");
    let old_ids = ids(&keys);
    keys.create(Principal::user("bob"), None, 2)
        .expect("create");
    // The temporary name is taken: creating it fails.
    std::fs::create_dir(dir.path().join("api_keys.json.tmp")).expect("block");
    assert!(keys.save(&path).is_err(), "the save reports the failure");
    assert_eq!(ids(&ApiKeys::load(&path).expect("load")), old_ids);
}
