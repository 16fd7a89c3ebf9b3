"""pschaos.psnodes.core.routing.after_restore: what a copy that restored its shard appends before it serves."""
from pschaos.psnodes.core.routing import Migration, Restored, Routing, after_restore

SRC, DST = (0, 1), (0, 1, 2)


def test_a_state_at_the_record_s_epoch_with_no_migration_changes_nothing():
    assert after_restore(0, 3, None, Routing(3, SRC)) == Restored()


def test_a_switch_the_state_missed_is_adopted():
    assert after_restore(0, 3, None, Routing(4, DST)) == Restored(route=(4, DST))


def test_a_switch_lifts_the_state_s_fence_by_itself_no_unfence_entry():
    assert after_restore(0, 3, "3.9.x", Routing(4, DST)) == Restored(route=(4, DST))


def test_a_fenced_migration_fences_its_sources_only():
    m = Migration("3.9.x", SRC, DST, "fenced")
    assert after_restore(1, 3, None, Routing(3, SRC, m)) == Restored(fence=m)
    assert after_restore(2, 3, None, Routing(3, SRC, m)) == Restored()       # a destination
    assert after_restore(0, 3, "3.9.x", Routing(3, SRC, m)) == Restored()    # fenced already


def test_a_migration_still_copying_fences_nothing():
    assert after_restore(0, 3, None, Routing(3, SRC, Migration("3.9.x", SRC, DST, "copy"))) == Restored()


def test_the_fence_of_a_migration_the_record_lost_is_lifted():
    assert after_restore(0, 3, "3.1.a", Routing(3, SRC)) == Restored(unfence="3.1.a")
    m = Migration("3.9.x", SRC, DST, "fenced")
    assert after_restore(0, 3, "3.1.a", Routing(3, SRC, m)) == Restored(unfence="3.1.a", fence=m)


def test_a_switch_then_a_new_fenced_migration_routes_then_fences():
    m = Migration("4.2.y", DST, (0, 1, 2, 3), "fenced")
    assert after_restore(0, 3, "3.9.x", Routing(4, DST, m)) == Restored(route=(4, DST), fence=m)


def test_a_record_behind_the_state_changes_nothing():
    assert after_restore(0, 5, "5.1.z", Routing(4, DST)) == Restored()
