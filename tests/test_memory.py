"""The compiler's pause of the cyclic garbage collector (sensorscript/memory.py)."""

import gc

from sensorscript.memory import paused_gc


def test_what_a_pause_made_goes_to_the_oldest_generation():
    """The objects made while the collector paused are handed to its oldest generation, not its
    youngest, whose next collection would walk all of them (a second at 10,240 workflows)."""
    assert gc.isenabled()
    with paused_gc():
        assert not gc.isenabled()
        made = [[index] for index in range(1000)]
    assert gc.isenabled()
    young = {id(o) for o in gc.get_objects(generation=0)}
    assert not any(id(item) in young for item in made)
    oldest = {id(o) for o in gc.get_objects(generation=2)}
    assert all(id(item) in oldest for item in made)


def test_a_pause_inside_a_pause_leaves_the_collector_off():
    with paused_gc():
        with paused_gc():
            pass
        assert not gc.isenabled()
    assert gc.isenabled()
