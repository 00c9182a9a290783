#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| raftlock_fuzz_cases::zookeeper_frame(data));
