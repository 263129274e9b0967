# hottext profile v5
# build-id: 572ac72487ae1966
# sample-kind: branch
fn compute_flag 54 1832
fn main 354 1901
call main compute_flag 15815
site main compute_flag 71 15815
block compute_flag 0 0 25 1317
block compute_flag 1 25 16 371
block compute_flag 2 41 8 46
block compute_flag 3 49 5 98
block main 1 55 13 133
block main 2 68 36 255
block main 13 325 14 131
block-edge compute_flag 0 1 5404
block-edge compute_flag 0 2 9786
block-edge compute_flag 1 3 5500
block-edge compute_flag 2 3 9699
block-edge main 1 2 15312
block-edge main 13 1 15432
