# hottext profile v1
fn main 64 1
fn work 32 9
fn leaf 16 4
call main work 9
call work leaf 4
call leaf work 1
