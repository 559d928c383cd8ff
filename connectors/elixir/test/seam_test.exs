defmodule EchoMQ.SeamTest do
  @moduledoc """
  R4.15, the sole raw-Redis seam: `lib/engine.ex` alone names the raw client (eredis) and the
  `emq:` key schema. Every other source file of the connector is scanned.
  """
  use ExUnit.Case, async: true

  @seam "lib/engine.ex"

  defp sources do
    here = EchoMQ.TestHelp.here()

    ["lib/**/*.ex", "lib/**/*.exs", "bin/**/*", "ci/**/*"]
    |> Enum.flat_map(&Path.wildcard(Path.join(here, &1)))
    |> Enum.filter(&File.regular?/1)
    |> Enum.map(&Path.relative_to(&1, here))
    |> Enum.uniq()
  end

  test "the seam exists and is the one module that calls eredis" do
    seam = File.read!(Path.join(EchoMQ.TestHelp.here(), @seam))
    assert seam =~ ":eredis.start_link("
    assert seam =~ ":eredis.qp("
    assert seam =~ ~s("emq:)
    # SPEC §10: the TLS transport and its settings live in the seam too
    assert seam =~ ":ssl.connect("
    assert seam =~ "verify: :verify_peer"
  end

  test "no other source file opens TLS or sockets of its own (R4.15, R10.2)" do
    offenders =
      for f <- sources(), f != @seam,
          File.read!(Path.join(EchoMQ.TestHelp.here(), f)) =~ ~r/:ssl\.|:gen_tcp\.|verify_none/,
          do: f

    assert offenders == [], "files other than #{@seam} open sockets or name TLS settings: #{inspect(offenders)}"
  end

  test "verification is never switched off" do
    seam = File.read!(Path.join(EchoMQ.TestHelp.here(), @seam))
    refute seam =~ "verify_none"
    refute seam =~ "server_name_indication: :disable"
  end

  test "no other source file names the raw client" do
    offenders =
      for f <- sources(), f != @seam, f != "ci/provision",
          File.read!(Path.join(EchoMQ.TestHelp.here(), f)) =~ ~r/eredis/i,
          do: f

    assert offenders == [], "files other than #{@seam} name eredis: #{inspect(offenders)}"
  end

  test "no other source file spells an emq: key" do
    offenders =
      for f <- sources(), f != @seam,
          File.read!(Path.join(EchoMQ.TestHelp.here(), f)) =~ "emq:",
          do: f

    assert offenders == [], "files other than #{@seam} spell emq: keys: #{inspect(offenders)}"
  end

  test "no module but the seam reaches eredis at run time (loaded code, not just text)" do
    here = EchoMQ.TestHelp.here()
    files = Path.wildcard(Path.join(here, "lib/**/*.ex"))
    assert length(files) >= 5

    for f <- files, Path.relative_to(f, here) != @seam do
      {:ok, forms} = f |> File.read!() |> Code.string_to_quoted()

      {_, hits} =
        Macro.prewalk(forms, [], fn
          {:., _, [:eredis, _]} = node, acc -> {node, [f | acc]}
          :eredis = node, acc -> {node, [f | acc]}
          node, acc -> {node, acc}
        end)

      assert hits == [], "#{f} refers to :eredis"
    end
  end
end
