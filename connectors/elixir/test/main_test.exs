defmodule EchoMQ.MainTest do
  @moduledoc "The real process, through its launcher (set by ci/test): framing, stop, bundle checks."
  use ExUnit.Case, async: true

  @launcher System.get_env("EMQ_ELIXIR_LAUNCHER")
  if @launcher == nil, do: @moduletag(skip: "EMQ_ELIXIR_LAUNCHER is not set (ci/test sets it)")

  defp run(input, args \\ [], env \\ []) do
    tmp = Path.join(System.tmp_dir!(), "emq-elixir-#{System.unique_integer([:positive])}")
    File.write!(tmp <> ".in", input)
    argv = Enum.map_join(args, " ", &("'" <> &1 <> "'"))
    cmd = "'#{@launcher}' #{argv} < '#{tmp}.in' 2> '#{tmp}.err'"
    {out, code} = System.cmd("sh", ["-c", cmd], env: env)
    err = File.read!(tmp <> ".err")
    File.rm(tmp <> ".in")
    File.rm(tmp <> ".err")
    {out, err, code}
  end

  test "one response per request, in order; stop answers nothing and exits 0" do
    input = ~s({"seq":1,"cmd":"hello","protocol":1}\n{"seq":2,"cmd":"bogus"}\n\n{"seq":3,"cmd":"stop"}\n{"seq":4,"cmd":"hello","protocol":1}\n)
    {out, _err, code} = run(input)
    assert code == 0
    lines = String.split(out, "\n", trim: true)
    assert length(lines) == 2
    assert Enum.map(lines, &(EchoMQ.JSON.decode(&1) |> elem(1) |> Map.get("seq"))) == [1, 2]
  end

  # SPEC §5 (R5.1): Erlang's default log handler writes to standard_io, stdout under
  # `erl -noshell`; a log event (an eredis report) must land on stderr, never on the wire.
  test "a log event goes to stderr, not to stdout" do
    probe = ~s{-eval 'spawn(fun() -> timer:sleep(700), logger:error("emq-logger-probe") end)'}
    hello = ~s({"seq":1,"cmd":"hello","protocol":1})
    tmp = Path.join(System.tmp_dir!(), "emq-elixir-log-#{System.unique_integer([:positive])}.err")
    # `stop` only once the probe's line is on stderr (at most 30 s): a busy machine delays the
    # log event, and a fixed pause would end the process before it.
    wait = "i=0; while ! grep -q emq-logger-probe '#{tmp}' 2>/dev/null && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done"
    cmd = "(echo '#{hello}'; #{wait}; echo '{\"seq\":2,\"cmd\":\"stop\"}') | '#{@launcher}' 2> '#{tmp}'"
    {out, code} = System.cmd("sh", ["-c", cmd], env: [{"ERL_AFLAGS", probe}])
    err = File.read!(tmp)
    File.rm(tmp)
    assert code == 0
    assert [_hello] = String.split(out, "\n", trim: true)
    refute out =~ "emq-logger-probe"
    assert err =~ "emq-logger-probe"
  end

  test "end of input exits 0" do
    assert {"", _, 0} = run("")
  end

  test "a tampered bundle exits 2 with one line on stderr (R2.1)" do
    dir = Path.join(System.tmp_dir!(), "emq-bundle-#{System.unique_integer([:positive])}")
    File.cp_r!(EchoMQ.TestHelp.bundle_dir(), dir)
    File.write!(Path.join(dir, "scripts/complete.lua"), "return 1\n")
    {out, err, code} = run("", ["--bundle", dir])
    File.rm_rf!(dir)
    assert code == 2
    assert out == ""
    assert [line] = String.split(err, "\n", trim: true)
    assert line =~ "complete"
  end

  test "EMQ_BUNDLE_DIR is honoured" do
    {_, err, code} = run("", [], [{"EMQ_BUNDLE_DIR", "/nonexistent-bundle"}])
    assert code == 2
    assert err =~ "/nonexistent-bundle"
  end
end
