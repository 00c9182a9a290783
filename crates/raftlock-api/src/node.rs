//! The generic tree: a node (`GET` and `PUT /v1/nodes/{path}`) and its
//! children (`GET /v1/nodes/{path}?children=true`).

use serde::{Deserialize, Serialize};

/// A node as read or as written. `ephemeral_owner` is `null` for a
/// persistent node and for another principal's session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeView {
    /// Its full path.
    pub path: String,
    /// Its data, base64.
    #[serde(default)]
    pub data: String,
    /// Its version: 1 when created, one more at every write.
    pub version: u64,
    /// The revision that created it.
    pub create_revision: u64,
    /// The revision that last wrote it.
    pub mod_revision: u64,
    /// The session that owns an ephemeral node.
    #[serde(default)]
    pub ephemeral_owner: Option<String>,
}

/// A node's children, by name, in name order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Children {
    /// Names, not paths.
    pub children: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_reads_the_documented_shape() {
        let text = r#"{"path":"/a","data":"MTI=","version":2,"create_revision":3,"mod_revision":5,"ephemeral_owner":null,"extra":1}"#;
        let node: NodeView = serde_json::from_str(text).expect("parses");
        assert_eq!((node.version, node.mod_revision), (2, 5));
        assert_eq!(node.data, "MTI=");
        assert!(serde_json::from_str::<NodeView>(r#"{"path":"/a"}"#).is_err());
        let children: Children = serde_json::from_str(r#"{"children":["a","b"]}"#).expect("parses");
        assert_eq!(children.children, ["a", "b"]);
    }
}
