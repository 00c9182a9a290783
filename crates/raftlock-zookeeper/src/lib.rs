//! raftlock's ZooKeeper front door. So far only its protocol layer:
//! [`wire`] decodes every request a ZooKeeper 3.5–3.8 client sends and
//! encodes every answer a server gives, as ZooKeeper's jute schema
//! defines them. The door that maps those requests onto raftlock is not
//! here yet.

pub mod wire;

#[doc(hidden)]
pub mod fuzzing;
