"""SQLite: node ids reserved inside an atomic block the run's code opened survive the block's rollback.

The block's rollback undoes the reservation (sqlite_sequence) while the run goes on using the ids, since
its calls happened all the same; no other run may be given them again.
"""
import pytest
from django.db import connection, transaction

from dag.models import Node
from dag.recording import write_path
from dag.recording.write_path.run_writes import FIRST_BLOCK
from tests.web.dag_helpers import new_session


class Rollback(Exception):
    pass


def node(writes, name):
    return writes.create(kind="code", name=name, status="running")


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(connection.vendor != "sqlite", reason="PostgreSQL's sequence never rolls back, and its "
                    "runs write inside such a block at once (dag.recording.write_path.run_writes)")
def test_ids_reserved_in_a_rolled_back_block_are_not_given_to_another_run():
    a = write_path.claim_session(new_session().pk, worker="w:1")
    b = write_path.claim_session(new_session().pk, worker="w:1")
    writes_a = write_path.RunWrites(a.pk, "w:1")
    for i in range(FIRST_BLOCK):  # the first block of ids used up
        node(writes_a, f"a{i}")
    writes_a.flush()
    with pytest.raises(Rollback):
        with transaction.atomic():  # a tool saving the app's rows, which fails and rolls back
            node(writes_a, "a-in-block")  # this call reserves the run's next block, in the block
            raise Rollback
    writes_a.flush()
    writes_b = write_path.RunWrites(b.pk, "w:1")
    b_node, a_node = node(writes_b, "b0"), node(writes_a, "a-after")
    assert a_node.pk != b_node.pk
    writes_b.flush()  # neither batch collides on the node table's primary key
    writes_a.flush()
    assert Node.objects.filter(session=a).count() == FIRST_BLOCK + 2
    assert Node.objects.filter(session=b).count() == 1
