# hottext profile v3
# samples: 7
fn hot%20fn(x) 100 5
fn caller 40 2
call caller hot%20fn(x) 3
site caller hot%20fn(x) 12 3
