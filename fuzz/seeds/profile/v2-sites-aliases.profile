# hottext profile v2
# build-id: e4d0879084abe29bb8355b459fb7e30ab5118896
# binary: server
# sample-kind: stack
# samples: 40
# event: cpu-clock:u
fn handle 531 10
fn hash 128 8
alias hash hash_v2
fn main 300 0
fn parse 775 12
fn parse.cold 64 0
call handle hash 6
site handle hash 100 6
call handle parse 12
site handle parse 264 10
call main handle 20
site main handle 40 20
call parse hash 2
