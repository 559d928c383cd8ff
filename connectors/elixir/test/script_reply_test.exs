defmodule EchoMQ.ScriptReplyTest do
  use ExUnit.Case, async: true
  alias EchoMQ.Engine

  # eredis 1.2.0 hands back an error reply split across two socket reads as a value.
  test "a script's value that reads as an error code and a space is that error" do
    assert Engine.script_reply("NOSCRIPT No matching script. Please use EVAL.") ==
             {:err, "NOSCRIPT No matching script. Please use EVAL."}

    assert Engine.script_reply("MOVED 3999 127.0.0.1:6381") == {:err, "MOVED 3999 127.0.0.1:6381"}
    assert Engine.script_reply("WRONGTYPE Operation against a key") == {:err, "WRONGTYPE Operation against a key"}
  end

  test "every string a bundle script answers stays a value" do
    for v <- ["j0000000000000001", "stale", "dead", "delayed"] do
      assert Engine.script_reply(v) == v
    end

    assert Engine.script_reply(1) == 1
    assert Engine.script_reply(["j0000000000000001", "NOSCRIPT x", "0"]) == ["j0000000000000001", "NOSCRIPT x", "0"]
    assert Engine.script_reply(nil) == nil
    assert Engine.script_reply({:err, "ERR x"}) == {:err, "ERR x"}
  end
end
