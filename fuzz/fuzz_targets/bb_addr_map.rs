#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    hottext::fuzz::bb_addr_map(data);
});
