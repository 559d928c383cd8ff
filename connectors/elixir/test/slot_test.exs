defmodule EchoMQ.SlotTest do
  use ExUnit.Case, async: true
  alias EchoMQ.{Router, Slot}

  test "CRC16/XMODEM check value and the cluster specification's examples" do
    assert Slot.crc16("123456789") == 0x31C3
    assert Slot.of_key("foo") == 12182
    assert Slot.of_key("{user1000}.following") == Slot.of_key("{user1000}.followers")
    assert Slot.of_key("{user1000}.following") == Slot.of_key("user1000")
  end

  test "hash tags: first { and the first } after it, non-empty" do
    assert Slot.hash_tag("a{q}b") == "q"
    assert Slot.hash_tag("foo{}{bar}") == "foo{}{bar}"
    assert Slot.hash_tag("foo{{bar}}zap") == "{bar"
    assert Slot.hash_tag("foo{bar}{zap}") == "bar"
    assert Slot.hash_tag("nobraces") == "nobraces"
    assert Slot.hash_tag("open{only") == "open{only"
  end

  test "a queue's keys share one slot with its job root" do
    q = "orders"
    slots = for k <- ["emq-x:{#{q}}:pending", "x{#{q}}:job:j0000000000000001"], do: Slot.of_key(k)
    assert Enum.uniq(slots) == [Slot.of_key(q)]
  end

  test "a CLUSTER SLOTS reply becomes a full 16384-slot table" do
    reply = [
      ["5461", "10922", ["127.0.0.1", "7001", "id2"], ["127.0.0.1", "7004", "id5"]],
      ["0", "5460", ["127.0.0.1", "7000", "id1"]],
      ["10923", "16383", ["", "7002", "id3"]]
    ]

    t = Router.slot_table(reply, "10.0.0.9")
    assert tuple_size(t) == 16384
    assert elem(t, 0) == {"127.0.0.1", 7000}
    assert elem(t, 5460) == {"127.0.0.1", 7000}
    assert elem(t, 5461) == {"127.0.0.1", 7001}
    assert elem(t, 16383) == {"10.0.0.9", 7002}
  end

  test "a table with a gap leaves the gap unowned" do
    t = Router.slot_table([["0", "99", ["h", "1"]], ["200", "16383", ["h", "2"]]], "h")
    assert elem(t, 100) == nil
    assert elem(t, 199) == nil
    assert elem(t, 200) == {"h", 2}
  end
end
