# hottext profile v4
# build-id: ab
fn hot%20loop 64 9
fn main 32 1
call main hot%20loop 9
site main hot%20loop 20 9
block hot%20loop 0 0 12 1
block hot%20loop 2 40 24 8
block main 1 8 4 1
