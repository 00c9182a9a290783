//! Writes the seed inputs of every fuzz target into `fuzz/corpus/<target>/`
//! (`cargo run -p raftlock-fuzz-cases --example seeds`): encoded by the
//! production code (the ZooKeeper codec's valid streams and frames among
//! them), plus the shipped cluster configs and sample JSON bodies.

use std::path::Path;

fn main() -> std::io::Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let corpus = root.join("fuzz/corpus");
    let mut seeds = raftlock_node::fuzzing::seeds();
    for entry in std::fs::read_dir(root.join("cluster-config"))? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "toml") {
            let text = std::fs::read(&path)?;
            seeds.push(("node_config", text.clone()));
            seeds.push(("api_config", text));
        }
    }
    for body in [
        r#"{"data":"aGVsbG8=","version":3}"#,
        r#"{"owner":"alice","ttl_ms":10000}"#,
        r#"{"token":17,"name":"/locks/a"}"#,
    ] {
        seeds.push(("json_body", body.as_bytes().to_vec()));
    }
    for frames in raftlock_zookeeper::fuzzing::seeds() {
        seeds.push(("zookeeper_frame", frames));
    }
    for (i, (target, bytes)) in seeds.iter().enumerate() {
        let dir = corpus.join(target);
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join(format!("seed-{i}")), bytes)?;
    }
    println!("{} seeds written under {}", seeds.len(), corpus.display());
    Ok(())
}
