#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| raftlock_fuzz_cases::proposal(data));
