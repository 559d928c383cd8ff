# Run by ci/test: elixir -pa <compiled ebin> -r test/test_helper.exs -r "test/*_test.exs"
ExUnit.start(capture_log: true)
# the fake RESP node of test/sentinel_test.exs and test/cluster_db_test.exs
Code.require_file("fake_node.exs", __DIR__)

defmodule EchoMQ.TestHelp do
  @here Path.expand("..", __DIR__)
  def here, do: @here
  def repo, do: Path.expand("../..", @here)
  def bundle_dir, do: Path.join(repo(), "bundle")

  def bundle do
    {:ok, b} = EchoMQ.Bundle.load(bundle_dir())
    b
  end
end
