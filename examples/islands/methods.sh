# The methods the islands experiment compares, for links.sh (island jobs on shaped links) and
# simulated.sh (one MPI world, simulated link); source it, then `every_method PREFIX` calls the
# sourcing script's `method RUN OVERRIDES...` once per method, each run named PREFIX + the method.
methods=(sync diloco diloco_int8 streaming noloco)
every_method() {
  local prefix=$1
  method "${prefix}sync" --set outer.algorithm=none
  method "${prefix}diloco" --set outer.algorithm=diloco
  method "${prefix}diloco_int8" --set outer.algorithm=diloco --set outer.compression=int8
  # P = 4 fragments (one layer each) needs H divisible by 4: H = 48, a fragment every 12 steps, its
  # exchange overlapping 2 inner steps.
  method "${prefix}streaming" --set outer.algorithm=streaming_diloco --set outer.inner_steps=48 \
    --set outer.fragments=4 --set outer.delay=2 --set outer.mix=0.5
  method "${prefix}noloco" --set outer.algorithm=noloco
}
