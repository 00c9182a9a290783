//! raftlock's ZooKeeper front door: [`wire`] decodes every request a
//! ZooKeeper 3.5–3.8 client sends and encodes every answer a server gives,
//! as ZooKeeper's jute schema defines them; [`door`] serves them over a
//! raftlock node (docs/zookeeper.md); [`client`] speaks them to a server
//! (raftlock's door or ZooKeeper itself) for raftlock's own tools.

pub mod client;
#[cfg(feature = "door")]
pub mod door;
pub mod wire;

#[doc(hidden)]
pub mod fuzzing;
