# Run by ci/test: elixir -pa <compiled ebin> -r test/test_helper.exs -r "test/*_test.exs"
ExUnit.start(capture_log: true)
# the fake RESP node of test/sentinel_test.exs and test/cluster_db_test.exs
Code.require_file("fake_node.exs", __DIR__)

defmodule EchoMQ.TestHelp do
  alias EchoMQ.{JSON, Wire}

  @here Path.expand("..", __DIR__)
  def here, do: @here
  def repo, do: Path.expand("../..", @here)
  def bundle_dir, do: Path.join(repo(), "bundle")

  def bundle do
    {:ok, b} = EchoMQ.Bundle.load(bundle_dir())
    b
  end

  # One request line through `Wire`, as the launcher feeds it: {decoded response, state}.
  # Shared by the tests that drive sessions (imported where they call it).
  def call(state, req) do
    {:reply, out, state} = Wire.handle_line(IO.iodata_to_binary(JSON.encode(req)), state)
    {:ok, resp} = JSON.decode(IO.iodata_to_binary(out))
    {resp, state}
  end
end
